package lang

// The effects of the projection functions on an instance, one apply*
// function per row of the function table (functions.go).

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/internal/decimal"
	"github.com/eventkit-go/eventstore/storage"
)

// describe names the JSON type of v for messages.
func describe(v any) string {
	switch v.(type) {
	case *object:
		return "an object"
	case *array:
		return "an array"
	case string:
		return "a string"
	case number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

func applySet(a *Applier, o *Op, s slot, in any) error {
	if n, ok := in.(number); ok { // numbers are rendered as strings
		d, err := decimal.Parse(string(n))
		if err != nil {
			return fmt.Errorf("input %s: %v", clip(string(n)), err)
		}
		in = d.String()
	}
	return s.set(a, clone(in))
}

func applyUnset(a *Applier, o *Op, s slot, _ any) error {
	switch {
	case s.obj != nil:
		s.obj.remove(&a.undo, s.key)
	case s.arr != nil:
		items := slices.Delete(slices.Clone(s.arr.items), s.idx, s.idx+1)
		s.arr.setItems(&a.undo, items)
	}
	return nil
}

func applyRemove(a *Applier, o *Op, s slot, _ any) error { return applyUnset(a, o, s, nil) }

func applyMerge(a *Applier, o *Op, s slot, in any) error {
	src, ok := in.(*object)
	if !ok {
		return fmt.Errorf("input is %s, not an object", describe(in))
	}
	cur, exists := s.get(a)
	if !exists {
		if err := s.set(a, clone(src)); err != nil {
			return err
		}
		return nil
	}
	dst, ok := cur.(*object)
	if !ok {
		return fmt.Errorf("target is %s, not an object", describe(cur))
	}
	for _, m := range src.members {
		dst.set(&a.undo, m.key, clone(m.val))
	}
	return nil
}

func applyClear(a *Applier, o *Op, s slot, _ any) error {
	cur, ok := s.get(a)
	if !ok {
		return nil
	}
	var empty any
	switch t := cur.(type) {
	case *object:
		if s.root {
			a.inst.root.replace(&a.undo, nil)
			return nil
		}
		empty = &object{}
	case *array:
		empty = &array{}
	case string:
		empty = ""
		if _, err := decimal.Parse(t); err == nil {
			empty = "0" // a number, as projections keep them
		}
	case number:
		empty = "0"
	case bool:
		empty = false
	default:
		return nil
	}
	return s.set(a, empty)
}

func applyDelete(a *Applier, _ *Op) error {
	in := a.inst
	saved := *in
	a.undo.pushFunc(func() { *in = saved })
	in.Deleted = true
	in.root = &object{}
	return nil
}

func applyAppend(a *Applier, o *Op, s slot, in any) error  { return addToArray(a, s, in, false) }
func applyPrepend(a *Applier, o *Op, s slot, in any) error { return addToArray(a, s, in, true) }

func addToArray(a *Applier, s slot, in any, front bool) error {
	cur, ok := s.get(a)
	if !ok {
		return s.set(a, &array{items: []any{clone(in)}})
	}
	arr, isArr := cur.(*array)
	if !isArr {
		return fmt.Errorf("target is %s, not an array", describe(cur))
	}
	if len(arr.items) >= maxArrayIndex {
		return fmt.Errorf("the array holds %d elements, the most allowed", maxArrayIndex)
	}
	if front {
		items := make([]any, 0, len(arr.items)+1)
		arr.setItems(&a.undo, append(append(items, clone(in)), arr.items...))
	} else {
		arr.setItems(&a.undo, append(arr.items, clone(in)))
	}
	return nil
}

func applyArith(negate, unit bool) func(a *Applier, o *Op, s slot, in any) error {
	return func(a *Applier, o *Op, s slot, in any) error {
		delta := decimal.Int(1)
		if !unit {
			if o.hasRaw {
				delta = o.rawNum
			} else {
				d, ok := toDecimal(in)
				if !ok {
					return fmt.Errorf("input %s is not a number", preview(in))
				}
				delta = d
			}
		}
		if negate {
			delta = delta.Neg()
		}
		cur := decimal.Int(0)
		if v, ok := s.get(a); ok {
			d, ok := toDecimal(v)
			if !ok {
				return fmt.Errorf("target %s is not a number", preview(v))
			}
			cur = d
		}
		sum, err := cur.Add(delta)
		if err != nil {
			return err
		}
		return s.set(a, sum.String())
	}
}

func applySetRef(a *Applier, o *Op, s slot, _ any) error {
	v, ok := s.get(a)
	if !ok {
		return fmt.Errorf("the target has no value to use as reference")
	}
	var ref storage.Reference
	switch t := v.(type) {
	case number:
		ref = numberRef(string(t))
	case string:
		ref = textOrNumberRef(t)
	default:
		return fmt.Errorf("a reference must be a string or a number, not %s", describe(v))
	}
	in := a.inst
	old := in.State.Reference
	in.State.Reference = ref
	a.undo.pushFunc(func() { in.State.Reference = old })
	return nil
}

func applyClearRef(a *Applier, _ *Op) error {
	in := a.inst
	old := in.State.Reference
	in.State.Reference = storage.Reference{}
	a.undo.pushFunc(func() { in.State.Reference = old })
	return nil
}

// maxRefText bounds a reference.
const maxRefText = 256

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// textOrNumberRef makes the reference of a string: a number when it holds
// one, else text.
func textOrNumberRef(s string) storage.Reference {
	if d, err := decimal.Parse(s); err == nil && s != "" {
		return storage.Reference{Kind: storage.RefNumber, Text: s, Number: d.Float()}
	}
	return storage.Reference{Kind: storage.RefText, Text: truncate(s, maxRefText)}
}

func numberRef(s string) storage.Reference {
	d, err := decimal.Parse(s)
	if err != nil {
		return storage.Reference{Kind: storage.RefText, Text: truncate(s, maxRefText)}
	}
	return storage.Reference{Kind: storage.RefNumber, Text: s, Number: d.Float()}
}

// ParseReference reads a reference given as text, as in a query: a decimal
// number is a storage.RefNumber, anything else a storage.RefText.
func ParseReference(s string) storage.Reference {
	return textOrNumberRef(s)
}

func preview(v any) string {
	return clip(string(appendJSON(nil, v)))
}
