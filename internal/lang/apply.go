package lang

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unsafe"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/tidwall/gjson"
)

// Instance is a projection instance being changed by a page of events:
// its JSON object held as a tree, and its stored metadata.
type Instance struct {
	ID      string
	State   storage.ProjectionState // metadata; Data is encoded at commit (Encode)
	Stored  bool                    // the storage holds the instance
	Deleted bool                    // deleted by the page's events
	Changed bool                    // changed by the page's events
	root    *object
	size    int // an upper estimate of the encoded size
}

// NewInstance returns the instance id that the storage does not hold: an
// empty object, with metadata st.
func NewInstance(id string, st storage.ProjectionState) *Instance {
	return &Instance{ID: id, root: &object{}, State: st, size: 2}
}

// StoredInstance returns the instance id that the storage holds as st.
func StoredInstance(id string, st storage.ProjectionState) *Instance {
	return &Instance{ID: id, root: parseObject(st.Data), State: st, Stored: true, size: len(st.Data)}
}

// Encode returns the JSON encoding of the instance's object.
func (in *Instance) Encode() []byte {
	return appendJSON(make([]byte, 0, in.size), in.root)
}

// Applier applies the functions of one event to one instance. The zero
// value is ready to use; one Applier reuses its buffers from event to
// event, and is not safe for concurrent use.
type Applier struct {
	inst  *Instance
	ev    *eventScope
	scope eventScope // what ev points to, reset for every event (Apply)
	undo  undoLog
	grown int    // bytes added by this event, an estimate
	slots []slot // reused by resolve
}

// Apply applies the functions ops of event e to instance in, whole or
// not at all: an error (the event's, to record) leaves in as it was. An
// instance whose encoding would grow over limit bytes is refused with an
// error wrapping ErrTooLarge.
func (a *Applier) Apply(in *Instance, e *storage.Event, ops []Op, limit int) error {
	a.scope = eventScope{e: e, reads: a.scope.reads[:0]}
	a.inst, a.ev = in, &a.scope
	return a.applyEvent(ops, limit)
}

// eventScope is the event being applied, as functions and filters read it.
type eventScope struct {
	e      *storage.Event
	parsed bool
	whole  any // the event data as a tree, when a filter needs it
	reads  []eventRead
}

// eventRead is a value read from the event, kept for the other functions
// and filter evaluations of the same event.
type eventRead struct {
	sel *Selector
	val any
	ok  bool
}

// maxEventReads bounds the reads an eventScope keeps.
const maxEventReads = 8

// unsafeString views b as a string without copying. The event data it is
// used on is never modified while a page is applied, and the tree values
// that share its bytes are encoded (copied) at commit.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// ErrTooLarge reports an instance over the size limit.
var ErrTooLarge = errors.New("instance too large")

// applyEvent applies ops to a.inst for a.ev, whole or not at all.
func (a *Applier) applyEvent(ops []Op, limit int) error {
	in := a.inst
	saved := *in
	a.undo.reset()
	a.grown = 0
	if in.Deleted {
		in.root, in.Deleted, in.size = &object{}, false, 2
		in.State.CreatedAt, in.State.Reference = a.ev.e.RecordedAt, storage.Reference{}
	}
	if in.State.CreatedAt.IsZero() {
		in.State.CreatedAt = a.ev.e.RecordedAt
	}
	err := a.run(ops)
	if err == nil && in.size+a.grown > limit {
		if n := encodedSize(in.root); n > limit {
			err = fmt.Errorf("the instance would grow to %d bytes, over the limit of %d: %w", n, limit, ErrTooLarge)
		} else {
			in.size, a.grown = n, 0
		}
	}
	if err != nil {
		a.undo.rollback()
		*in = saved
		return err
	}
	in.size += a.grown
	in.Changed = true
	in.State.Position = a.ev.e.Position
	in.State.UpdatedAt = a.ev.e.RecordedAt
	return nil
}

func (a *Applier) run(ops []Op) error {
	for i := range ops {
		o := &ops[i]
		if a.inst.Deleted {
			return nil // delete ends the handler
		}
		if o.cond {
			sc := filterScope{at: a.ev.data(), ev: a.ev, inst: a.inst}
			if !o.efilter.match(&sc) {
				continue
			}
		}
		if o.fn.whole != nil {
			if err := o.fn.whole(a, o); err != nil {
				return fmt.Errorf("%s: %w", o.fn.name, err)
			}
			continue
		}
		var in any
		switch {
		case o.hasRaw:
			in = o.raw
			a.grown += o.rawSize
		case o.hasEvent:
			v, ok := a.input(o)
			if !ok {
				continue // a missing event field leaves the target unchanged
			}
			in = v
		}
		slots, err := a.resolve(o)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.fn.name, o.target, err)
		}
		for j := len(slots) - 1; j >= 0; j-- { // backwards: removals keep earlier indexes valid
			if err := o.fn.apply(a, o, slots[j], in); err != nil {
				return fmt.Errorf("%s %s: %w", o.fn.name, o.target, err)
			}
		}
	}
	return nil
}

// data returns the event data as a tree.
func (ev *eventScope) data() any {
	if !ev.parsed {
		ev.parsed = true
		if ev.e.Data != nil {
			ev.whole = fromJSON(gjson.Parse(unsafeString(ev.e.Data)))
		} else {
			ev.whole = &object{}
		}
	}
	return ev.whole
}

// read returns the value an $.event selector without [?] names.
func (ev *eventScope) read(sel *Selector) (any, bool) {
	for i := range ev.reads {
		if ev.reads[i].sel == sel {
			return ev.reads[i].val, ev.reads[i].ok
		}
	}
	v, ok := ev.readData(sel)
	if len(ev.reads) < maxEventReads {
		ev.reads = append(ev.reads, eventRead{sel, v, ok})
	}
	return v, ok
}

func (ev *eventScope) readData(sel *Selector) (any, bool) {
	if ev.parsed || sel.isRoot() {
		return walkKeys(ev.data(), sel.steps)
	}
	if ev.e.Data == nil {
		return nil, false
	}
	steps := sel.steps
	var r gjson.Result
	if n := len(steps); n > 0 && steps[n-1].kind == stepKeys {
		if n == 1 {
			r = gjson.ParseBytes(ev.e.Data)
		} else {
			r = gjson.Get(unsafeString(ev.e.Data), sel.gpath)
		}
		if !r.Exists() {
			return nil, false
		}
		return walkKeys(fromJSON(r), steps[n-1:])
	}
	r = gjson.Get(unsafeString(ev.e.Data), sel.gpath)
	if !r.Exists() {
		return nil, false
	}
	return fromJSON(r), true
}

// walkKeys is walk that also serves a final ['a','b'] step.
func walkKeys(v any, steps []step) (any, bool) {
	n := len(steps)
	if n == 0 || steps[n-1].kind != stepKeys {
		return walk(v, steps)
	}
	v, ok := walk(v, steps[:n-1])
	if !ok {
		return nil, false
	}
	src, ok := v.(*object)
	if !ok {
		return nil, false
	}
	out := &object{}
	for _, k := range steps[n-1].keys {
		if x, ok := src.get(k); ok {
			out.members = append(out.members, member{k, x})
		}
	}
	return out, true
}

// metadata returns the value of a $.metadata selector.
func (ev *eventScope) metadata(sel *Selector, in *Instance) (any, bool) {
	e := ev.e
	switch sel.steps[0].key {
	case "aggregateId":
		return e.AggregateID, true
	case "aggregateType", "feedName":
		return e.AggregateType, true
	case "eventId":
		return e.ID, true
	case "eventType":
		return e.Type, true
	case "timestamp":
		return millis(e.RecordedAt), true
	case "sequenceNumber":
		return number(strconv.FormatInt(e.Position, 10)), true
	case "createdAt":
		if in == nil || in.State.CreatedAt.IsZero() {
			return millis(e.RecordedAt), true
		}
		return millis(in.State.CreatedAt), true
	case "updatedAt":
		if in == nil || in.State.UpdatedAt.IsZero() {
			return millis(e.RecordedAt), true
		}
		return millis(in.State.UpdatedAt), true
	}
	// A key of the event's metadata (checkMetadata allows no other).
	if v, ok := e.Metadata.Value(sel.steps[0].key); ok {
		return v, true
	}
	return nil, false
}

func millis(t time.Time) number {
	return number(strconv.FormatInt(t.UnixMilli(), 10))
}

// input returns the input of o read from the event.
func (a *Applier) input(o *Op) (any, bool) {
	sel := &o.event
	if sel.root == metadataRoot {
		return a.ev.metadata(sel, a.inst)
	}
	if sel.filterAt < 0 {
		v, ok := a.ev.read(sel)
		if ok {
			a.grown += encodedSize(v)
		}
		return v, ok
	}
	base, ok := walk(a.ev.data(), sel.steps[:sel.filterAt])
	arr, isArr := base.(*array)
	if !ok || !isArr {
		return nil, false
	}
	out := &array{}
	for _, el := range arr.items {
		sc := filterScope{at: el, ev: a.ev, inst: a.inst}
		if !o.efilter.match(&sc) {
			continue
		}
		if v, ok := walkKeys(el, sel.steps[sel.filterAt+1:]); ok {
			out.items = append(out.items, v)
		}
	}
	a.grown += encodedSize(out)
	return out, true
}

// slot is a place in the instance a function writes: the root, a member
// of an object or an element of an array.
type slot struct {
	root bool
	obj  *object
	key  string
	arr  *array
	idx  int
}

func (s slot) get(a *Applier) (any, bool) {
	switch {
	case s.root:
		return a.inst.root, true
	case s.obj != nil:
		return s.obj.get(s.key)
	}
	return s.arr.items[s.idx], true
}

func (s slot) set(a *Applier, v any) error {
	switch {
	case s.root:
		o, ok := v.(*object)
		if !ok {
			return fmt.Errorf("the whole projection can only be set to an object, not %s", describe(v))
		}
		a.inst.root.replace(&a.undo, o.members)
	case s.obj != nil:
		s.obj.set(&a.undo, s.key, v)
	default:
		s.arr.setItem(&a.undo, s.idx, v)
	}
	return nil
}

// resolve returns the slots o's target names, creating missing objects on
// the way (but not through a [?], whose missing array matches nothing).
func (a *Applier) resolve(o *Op) ([]slot, error) {
	a.slots = a.slots[:0]
	if o.target.isRoot() {
		a.slots = append(a.slots, slot{root: true})
		return a.slots, nil
	}
	err := a.descend(a.inst.root, o.target.steps, o, &a.slots)
	return a.slots, err
}

func (a *Applier) descend(cur any, steps []step, o *Op, out *[]slot) error {
	st := steps[0]
	last := len(steps) == 1
	switch st.kind {
	case stepKey:
		obj, ok := cur.(*object)
		if !ok {
			return fmt.Errorf("%q is under %s, not an object", st.key, describe(cur))
		}
		if last {
			*out = append(*out, slot{obj: obj, key: st.key})
			return nil
		}
		next, ok := obj.get(st.key)
		if !ok {
			if steps[1].kind != stepKey {
				return nil // no array to index or filter
			}
			child := &object{}
			obj.set(&a.undo, st.key, child)
			next = child
		}
		return a.descend(next, steps[1:], o, out)
	case stepIndex:
		arr, ok := cur.(*array)
		if !ok {
			return fmt.Errorf("[%d] is applied to %s, not an array", st.index, describe(cur))
		}
		if st.index >= len(arr.items) {
			return fmt.Errorf("index %d is out of range: the array has %d elements", st.index, len(arr.items))
		}
		if last {
			*out = append(*out, slot{arr: arr, idx: st.index})
			return nil
		}
		return a.descend(arr.items[st.index], steps[1:], o, out)
	case stepFilter:
		arr, ok := cur.(*array)
		if !ok {
			return fmt.Errorf("[?] is applied to %s, not an array", describe(cur))
		}
		for i, el := range arr.items {
			sc := filterScope{at: el, ev: a.ev, inst: a.inst}
			if !o.tfilter.match(&sc) {
				continue
			}
			if last {
				*out = append(*out, slot{arr: arr, idx: i})
			} else if err := a.descend(el, steps[1:], o, out); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("cannot write through ['a','b']")
}
