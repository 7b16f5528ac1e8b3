package eventstore

import (
	"fmt"

	"github.com/eventkit-go/eventstore/internal/decimal"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// emptyObject is the state of a projection instance no event has changed.
var emptyObject = []byte("{}")

// applyOps applies one handler's ops for an event with the given data to
// state, a JSON object, and returns the new state. On error the caller
// discards the result, so an event is applied whole or not at all. state is
// not modified.
func applyOps(state []byte, ops []op, data []byte) ([]byte, error) {
	var buf [64]byte
	for i := range ops {
		o := &ops[i]
		var in gjson.Result
		if o.hasSel {
			if data == nil {
				continue
			}
			in = gjson.GetBytes(data, o.event.gpath)
			if !in.Exists() {
				continue // a missing event field leaves the target unchanged
			}
		}
		var value []byte
		switch o.kind {
		case opSet:
			switch {
			case o.hasRaw:
				value = o.raw
			case in.Type == gjson.Number:
				d, err := decimal.Parse(in.Raw)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %v", o.event, clip(in.Raw), err)
				}
				value = quoteNumber(buf[:0], d)
			default:
				value = []byte(in.Raw)
			}
		case opAdd, opInc:
			delta := decimal.Int(1)
			if o.kind == opAdd {
				if o.hasRaw {
					delta = o.rawNum
				} else {
					d, err := number(in)
					if err != nil {
						return nil, fmt.Errorf("add %s: input %s %v", o.target, o.event, err)
					}
					delta = d
				}
			}
			cur := decimal.Int(0)
			if r := gjson.GetBytes(state, o.target.gpath); r.Exists() {
				d, err := number(r)
				if err != nil {
					return nil, fmt.Errorf("%s %s: target %v", opName(o.kind), o.target, err)
				}
				cur = d
			}
			sum, err := cur.Add(delta)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %v", opName(o.kind), o.target, err)
			}
			value = quoteNumber(buf[:0], sum)
		}
		if err := checkParents(state, o.target); err != nil {
			return nil, err
		}
		next, err := sjson.SetRawBytes(state, o.target.spath, value)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %v", opName(o.kind), o.target, err)
		}
		state = next
	}
	return state, nil
}

// number reads a decimal from a JSON number or from a string holding one
// (numbers in projection states are stored as strings).
func number(r gjson.Result) (decimal.Dec, error) {
	var (
		d   decimal.Dec
		err error
	)
	switch r.Type {
	case gjson.Number:
		d, err = decimal.Parse(r.Raw)
	case gjson.String:
		d, err = decimal.Parse(r.Str)
	default:
		return d, fmt.Errorf("is not a number: %s", clip(r.Raw))
	}
	if err != nil {
		return d, fmt.Errorf("is not a number: %s (%v)", clip(r.Raw), err)
	}
	return d, nil
}

// checkParents fails when a field on the path to target exists but is not
// an object, so that a write never silently replaces or corrupts it.
func checkParents(state []byte, target selector) error {
	if len(target.keys) < 2 {
		return nil
	}
	path := ""
	for i, k := range target.keys[:len(target.keys)-1] {
		if i > 0 {
			path += "."
		}
		path += k
		r := gjson.GetBytes(state, path)
		if !r.Exists() {
			return nil
		}
		if !r.IsObject() {
			return fmt.Errorf("%s: %s.%s is %s, not an object", target, target.root, path, clip(r.Raw))
		}
	}
	return nil
}

func quoteNumber(b []byte, d decimal.Dec) []byte {
	b = append(b, '"')
	b = d.Append(b)
	return append(b, '"')
}

func opName(k opKind) string {
	switch k {
	case opSet:
		return FuncSet
	case opAdd:
		return FuncAdd
	}
	return FuncInc
}
