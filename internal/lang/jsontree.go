package lang

import (
	"strconv"

	"github.com/eventkit-go/eventstore/internal/jsonenc"
	"github.com/tidwall/gjson"
)

// The projection engine works on a decoded tree of the instance's JSON,
// read once per page of events and encoded once per commit, so that the
// cost of a function does not grow with the size of the instance. Values
// are:
//
//	*object   a JSON object, members in insertion order
//	*array    a JSON array
//	string    a JSON string
//	number    a JSON number, its literal text
//	bool      true or false
//	nil       null
//
// Every change goes through the methods below, which record how to undo
// it in an undo log, so that an event whose functions fail part-way leaves
// the instance exactly as it was.

// number is a JSON number kept as its literal text (exact).
type number string

// member is one key and value of an object.
type member struct {
	key string
	val any
}

// object is a JSON object whose members keep their insertion order.
type object struct {
	members []member
	index   map[string]int // built once an object grows large
}

// array is a JSON array.
type array struct {
	items []any
}

// indexAbove is the member count from which objects keep a key index.
const indexAbove = 16

func (o *object) find(key string) int {
	if o.index != nil {
		if i, ok := o.index[key]; ok {
			return i
		}
		return -1
	}
	for i := range o.members {
		if o.members[i].key == key {
			return i
		}
	}
	return -1
}

func (o *object) get(key string) (any, bool) {
	if i := o.find(key); i >= 0 {
		return o.members[i].val, true
	}
	return nil, false
}

func (o *object) reindex() {
	if len(o.members) <= indexAbove {
		o.index = nil
		return
	}
	o.index = make(map[string]int, len(o.members))
	for i, m := range o.members {
		o.index[m.key] = i
	}
}

// undoKind says what an undo entry restores.
type undoKind uint8

const (
	undoMember   undoKind = iota // obj.members[idx].val = val
	undoAppended                 // drop obj's last member, key
	undoMembers                  // obj.members = members
	undoItems                    // arr.items = items
	undoItem                     // arr.items[idx] = val
	undoFunc                     // fn()
)

// undoEntry records how to reverse one change, without allocating a
// closure for the common ones.
type undoEntry struct {
	kind    undoKind
	idx     int
	key     string
	val     any
	obj     *object
	arr     *array
	members []member
	items   []any
	fn      func()
}

// undoLog records how to reverse changes.
type undoLog struct {
	steps []undoEntry
}

func (u *undoLog) push(e undoEntry) {
	if u != nil {
		u.steps = append(u.steps, e)
	}
}

// pushFunc records a change reversed by fn.
func (u *undoLog) pushFunc(fn func()) { u.push(undoEntry{kind: undoFunc, fn: fn}) }

// rollback reverses every recorded change, newest first.
func (u *undoLog) rollback() {
	for i := len(u.steps) - 1; i >= 0; i-- {
		e := &u.steps[i]
		switch e.kind {
		case undoMember:
			e.obj.members[e.idx].val = e.val
		case undoAppended:
			e.obj.members = e.obj.members[:len(e.obj.members)-1]
			if e.obj.index != nil {
				delete(e.obj.index, e.key)
			}
		case undoMembers:
			e.obj.members = e.members
			e.obj.reindex()
		case undoItems:
			e.arr.items = e.items
		case undoItem:
			e.arr.items[e.idx] = e.val
		case undoFunc:
			e.fn()
		}
	}
	u.reset()
}

// reset forgets the recorded changes (they are kept).
func (u *undoLog) reset() {
	clear(u.steps)
	u.steps = u.steps[:0]
}

// set assigns key in o.
func (o *object) set(u *undoLog, key string, v any) {
	if i := o.find(key); i >= 0 {
		u.push(undoEntry{kind: undoMember, obj: o, idx: i, val: o.members[i].val})
		o.members[i].val = v
		return
	}
	o.members = append(o.members, member{key, v})
	if o.index != nil {
		o.index[key] = len(o.members) - 1
	} else if len(o.members) > indexAbove {
		o.reindex()
	}
	u.push(undoEntry{kind: undoAppended, obj: o, key: key})
}

// remove deletes key from o and reports whether it was there.
func (o *object) remove(u *undoLog, key string) bool {
	i := o.find(key)
	if i < 0 {
		return false
	}
	old := o.members
	next := make([]member, 0, len(old)-1)
	next = append(append(next, old[:i]...), old[i+1:]...)
	o.members = next
	o.reindex()
	u.push(undoEntry{kind: undoMembers, obj: o, members: old})
	return true
}

// replace sets all members of o at once.
func (o *object) replace(u *undoLog, members []member) {
	u.push(undoEntry{kind: undoMembers, obj: o, members: o.members})
	o.members = members
	o.reindex()
}

// setItems replaces the items of a.
func (a *array) setItems(u *undoLog, items []any) {
	u.push(undoEntry{kind: undoItems, arr: a, items: a.items})
	a.items = items
}

// setItem assigns a.items[i].
func (a *array) setItem(u *undoLog, i int, v any) {
	u.push(undoEntry{kind: undoItem, arr: a, idx: i, val: a.items[i]})
	a.items[i] = v
}

// fromJSON converts a gjson value into a tree value. Strings that were
// numbers stay strings; numbers keep their literal.
func fromJSON(r gjson.Result) any {
	switch r.Type {
	case gjson.String:
		return r.Str
	case gjson.Number:
		return number(r.Raw)
	case gjson.True:
		return true
	case gjson.False:
		return false
	case gjson.Null:
		return nil
	}
	if r.IsArray() {
		a := &array{}
		r.ForEach(func(_, v gjson.Result) bool {
			a.items = append(a.items, fromJSON(v))
			return true
		})
		return a
	}
	if r.IsObject() {
		o := &object{}
		r.ForEach(func(k, v gjson.Result) bool {
			if i := o.find(k.Str); i >= 0 { // a repeated key: the last wins
				o.members[i].val = fromJSON(v)
				return true
			}
			o.members = append(o.members, member{k.Str, fromJSON(v)})
			if len(o.members) > indexAbove && o.index == nil {
				o.reindex()
			} else if o.index != nil {
				o.index[k.Str] = len(o.members) - 1
			}
			return true
		})
		return o
	}
	return nil
}

// parseObject decodes a stored instance state, which is a JSON object.
func parseObject(b []byte) *object {
	if o, ok := fromJSON(gjson.ParseBytes(b)).(*object); ok {
		return o
	}
	return &object{}
}

// clone returns a deep copy of v, so that one value can be placed at
// several targets without sharing.
func clone(v any) any {
	switch t := v.(type) {
	case *object:
		c := &object{members: make([]member, len(t.members))}
		for i, m := range t.members {
			c.members[i] = member{m.key, clone(m.val)}
		}
		c.reindex()
		return c
	case *array:
		c := &array{items: make([]any, len(t.items))}
		for i, it := range t.items {
			c.items[i] = clone(it)
		}
		return c
	}
	return v
}

// appendJSON appends the JSON encoding of v to b.
func appendJSON(b []byte, v any) []byte {
	switch t := v.(type) {
	case *object:
		b = append(b, '{')
		for i, m := range t.members {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, m.key)
			b = append(b, ':')
			b = appendJSON(b, m.val)
		}
		return append(b, '}')
	case *array:
		b = append(b, '[')
		for i, it := range t.items {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, it)
		}
		return append(b, ']')
	case string:
		return appendString(b, t)
	case number:
		return append(b, t...)
	case bool:
		return strconv.AppendBool(b, t)
	}
	return append(b, "null"...)
}

// appendString appends s as a JSON string, as encoding/json writes it with
// HTML escaping off (invalid UTF-8 becomes \ufffd).
func appendString(b []byte, s string) []byte { return jsonenc.AppendString(b, s) }

// encodedSize returns the length of v's JSON encoding without building it.
func encodedSize(v any) int {
	switch t := v.(type) {
	case *object:
		n := 2 + max(len(t.members)-1, 0)
		for _, m := range t.members {
			n += len(m.key) + 3 + encodedSize(m.val)
		}
		return n
	case *array:
		n := 2 + max(len(t.items)-1, 0)
		for _, it := range t.items {
			n += encodedSize(it)
		}
		return n
	case string:
		return len(t) + 2 // close enough for a bound: escapes are rare
	case number:
		return len(t)
	case bool:
		if t {
			return 4
		}
		return 5
	}
	return 4
}
