package lang

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// testProblems collects compile problems as "field: message" lines.
type testProblems []string

func (p *testProblems) Add(field, format string, args ...any) {
	*p = append(*p, field+": "+fmt.Sprintf(format, args...))
}

// compileOps compiles fns as the functions of one handler.
func compileOps(fns ...Function) ([]Op, error) {
	var p testProblems
	ops := make([]Op, 0, len(fns))
	for i, f := range fns {
		if o, ok := CompileFunction(&p, fmt.Sprintf("functions[%d]", i), f); ok {
			ops = append(ops, o)
		}
	}
	if len(p) > 0 {
		return nil, errors.New(strings.Join(p, "; "))
	}
	return ops, nil
}

// applyOne compiles fns, applies them to an instance holding state for
// an event with data, and returns the new state, the reference and
// whether the instance was deleted.
func applyOne(t *testing.T, state, data string, fns ...Function) (string, storage.Reference, bool, error) {
	t.Helper()
	ops, err := compileOps(fns...)
	if err != nil {
		return "", storage.Reference{}, false, err
	}
	in := &Instance{ID: "i", root: parseObject([]byte(state)), Stored: true, size: len(state)}
	e := &storage.Event{ID: "e1", Type: "E", AggregateType: "f", AggregateID: "a1", Position: 7, RecordedAt: time.UnixMilli(1700000000000).UTC()}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	var a Applier
	err = a.Apply(in, e, ops, 1<<20)
	return string(appendJSON(nil, in.root)), in.State.Reference, in.Deleted, err
}

func f(name, target, event string) Function {
	return Function{Name: name, TargetSelector: target, EventSelector: event}
}

func raw(name, target, data string) Function {
	return Function{Name: name, TargetSelector: target, RawData: json.RawMessage(data)}
}

func TestFunctionTable(t *testing.T) {
	todos := `{"todos":[{"id":"1","done":false},{"id":"2","done":false}]}`
	cases := []struct {
		name, state, data string
		fns               []Function
		want              string // state after, or "error: <substring>"
	}{
		{"set from event", `{}`, `{"a":"x"}`, []Function{f("set", "$.projection.b", "$.event.a")}, `{"b":"x"}`},
		{"set number renders string", `{}`, `{"n":1.50}`, []Function{f("set", "$.projection.n", "$.event.n")}, `{"n":"1.50"}`},
		{"set object keeps nested numbers", `{}`, `{"o":{"n":1}}`, []Function{f("set", "$.projection.o", "$.event.o")}, `{"o":{"n":1}}`},
		{"set raw string", `{}`, ``, []Function{raw("set", "$.projection.s", `"placed"`)}, `{"s":"placed"}`},
		{"set raw object", `{}`, ``, []Function{raw("set", "$.projection.o", `{"a":[1,2]}`)}, `{"o":{"a":[1,2]}}`},
		{"set creates parents", `{}`, `{"c":"Oslo"}`, []Function{f("set", "$.projection.a.b.city", "$.event.c")}, `{"a":{"b":{"city":"Oslo"}}}`},
		{"set missing event field is no-op", `{"x":1}`, `{}`, []Function{f("set", "$.projection.x", "$.event.nope")}, `{"x":1}`},
		{"set through a string fails", `{"a":"s"}`, `{"v":1}`, []Function{f("set", "$.projection.a.b", "$.event.v")}, "error: not an object"},
		{"set root from event", `{"old":1}`, `{"a":1}`, []Function{{Name: "set", EventSelector: "$.event"}}, `{"a":1}`},
		{"set index", `{"l":[1,2]}`, `{"v":"x"}`, []Function{f("set", "$.projection.l[1]", "$.event.v")}, `{"l":[1,"x"]}`},
		{"set index out of range", `{"l":[1]}`, `{"v":"x"}`, []Function{f("set", "$.projection.l[3]", "$.event.v")}, "error: out of range"},
		{"set metadata", `{}`, `{}`, []Function{f("set", "$.projection.by", "$.metadata.aggregateId"), f("set", "$.projection.at", "$.metadata.timestamp")}, `{"by":"a1","at":"1700000000000"}`},
		{"set multi-key", `{}`, `{"a":1,"b":"x","c":3}`, []Function{f("set", "$.projection.o", "$.event['a','b']")}, `{"o":{"a":1,"b":"x"}}`},
		{"unset", `{"a":1,"b":2}`, ``, []Function{{Name: "unset", TargetSelector: "$.projection.a"}}, `{"b":2}`},
		{"unset missing", `{"b":2}`, ``, []Function{{Name: "unset", TargetSelector: "$.projection.a"}}, `{"b":2}`},
		{"merge event into root", `{"a":1}`, `{"b":2,"a":3}`, []Function{{Name: "merge"}}, `{"a":3,"b":2}`},
		{"merge raw into field", `{"o":{"x":1}}`, ``, []Function{raw("merge", "$.projection.o", `{"y":2}`)}, `{"o":{"x":1,"y":2}}`},
		{"merge into non-object", `{"o":5}`, `{"a":1}`, []Function{{Name: "merge", TargetSelector: "$.projection.o"}}, "error: not an object"},
		{"merge non-object input", `{}`, `{"a":1}`, []Function{{Name: "merge", EventSelector: "$.event.a"}}, "error: not an object"},
		{"clear types", `{"s":"x","n":"5","b":true,"l":[1],"o":{"a":1}}`, ``, []Function{
			{Name: "clear", TargetSelector: "$.projection.s"}, {Name: "clear", TargetSelector: "$.projection.n"},
			{Name: "clear", TargetSelector: "$.projection.b"}, {Name: "clear", TargetSelector: "$.projection.l"},
			{Name: "clear", TargetSelector: "$.projection.o"}}, `{"s":"","n":"0","b":false,"l":[],"o":{}}`},
		{"clear all", `{"a":1}`, ``, []Function{{Name: "clear"}}, `{}`},
		{"append event value", `{}`, `{"v":"a"}`, []Function{f("append", "$.projection.l", "$.event.v")}, `{"l":["a"]}`},
		{"append whole event", `{"l":[1]}`, `{"v":"a"}`, []Function{{Name: "append", TargetSelector: "$.projection.l"}}, `{"l":[1,{"v":"a"}]}`},
		{"push is append", `{"l":[1]}`, ``, []Function{raw("push", "$.projection.l", `2`)}, `{"l":[1,2]}`},
		{"prepend", `{"l":[1]}`, ``, []Function{raw("prepend", "$.projection.l", `0`)}, `{"l":[0,1]}`},
		{"append to non-array", `{"l":"x"}`, ``, []Function{raw("append", "$.projection.l", `1`)}, "error: not an array"},
		{"remove by filter", todos, `{"id":"1"}`, []Function{{Name: "remove", TargetSelector: "$.projection.todos[?]", TargetFilter: "@.id == $.event.id"}}, `{"todos":[{"id":"2","done":false}]}`},
		{"remove all matches", `{"l":[1,2,1,3]}`, ``, []Function{{Name: "remove", TargetSelector: "$.projection.l[?]", TargetFilter: "@ == 1"}}, `{"l":[2,3]}`},
		{"remove key", `{"a":1,"b":2}`, ``, []Function{{Name: "remove", TargetSelector: "$.projection.a"}}, `{"b":2}`},
		{"filtered set", todos, `{"id":"2"}`, []Function{{Name: "set", TargetSelector: "$.projection.todos[?].done", TargetFilter: "[?(@.id == $.event.id)]", RawData: json.RawMessage(`true`)}}, `{"todos":[{"id":"1","done":false},{"id":"2","done":true}]}`},
		{"filter on non-array", `{"todos":{}}`, `{"id":"2"}`, []Function{{Name: "set", TargetSelector: "$.projection.todos[?].done", TargetFilter: "@.id == '2'", RawData: json.RawMessage(`true`)}}, "error: not an array"},
		{"filter on missing array is no-op", `{}`, `{"id":"2"}`, []Function{{Name: "set", TargetSelector: "$.projection.todos[?].done", TargetFilter: "@.id == '2'", RawData: json.RawMessage(`true`)}}, `{}`},
		{"add event", `{"t":"1.1"}`, `{"v":2.2}`, []Function{f("add", "$.projection.t", "$.event.v")}, `{"t":"3.3"}`},
		{"add missing target", `{}`, `{"v":"0.1"}`, []Function{f("add", "$.projection.t", "$.event.v")}, `{"t":"0.1"}`},
		{"add raw", `{"t":"1"}`, ``, []Function{raw("add", "$.projection.t", `"2.5"`)}, `{"t":"3.5"}`},
		{"add non-number", `{}`, `{"v":"x"}`, []Function{f("add", "$.projection.t", "$.event.v")}, "error: not a number"},
		{"add to non-number", `{"t":"x"}`, `{"v":1}`, []Function{f("add", "$.projection.t", "$.event.v")}, "error: not a number"},
		{"subtract", `{"t":"1"}`, `{"v":0.25}`, []Function{f("subtract", "$.projection.t", "$.event.v")}, `{"t":"0.75"}`},
		{"inc dec", `{}`, ``, []Function{{Name: "inc", TargetSelector: "$.projection.c"}, {Name: "inc", TargetSelector: "$.projection.c"}, {Name: "dec", TargetSelector: "$.projection.d"}}, `{"c":"2","d":"-1"}`},
		{"inc in filtered elements", `{"l":[{"k":"a","n":"1"},{"k":"b"}]}`, ``, []Function{{Name: "inc", TargetSelector: "$.projection.l[?].n", TargetFilter: "@.k != 'zzz'"}}, `{"l":[{"k":"a","n":"2"},{"k":"b","n":"1"}]}`},
		{"event filter condition false", `{}`, `{"amount":5}`, []Function{{Name: "inc", TargetSelector: "$.projection.big", EventFilter: "@.amount > 100"}}, `{}`},
		{"event filter condition true", `{}`, `{"amount":500}`, []Function{{Name: "inc", TargetSelector: "$.projection.big", EventFilter: "$.event.amount > 100 && $.metadata.eventType == 'E'"}}, `{"big":"1"}`},
		{"event array filter", `{}`, `{"items":[{"p":5,"n":"a"},{"p":50,"n":"b"}]}`, []Function{{Name: "set", TargetSelector: "$.projection.pricey", EventSelector: "$.event.items[?].n", EventFilter: "@.p >= 10"}}, `{"pricey":["b"]}`},
		{"error rolls back earlier functions", `{"a":"1"}`, `{"v":"x"}`, []Function{{Name: "inc", TargetSelector: "$.projection.a"}, f("add", "$.projection.b", "$.event.v")}, "error: not a number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, _, err := applyOne(t, c.state, c.data, c.fns...)
			if want, ok := strings.CutPrefix(c.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("got state %s and error %v, want an error containing %q", got, err, want)
				}
				if got != mustCompact(c.state) {
					t.Fatalf("a failed event changed the instance: %s, was %s", got, c.state)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

func mustCompact(s string) string { return string(appendJSON(nil, parseObject([]byte(s)))) }

func TestDeleteAndReferences(t *testing.T) {
	_, _, deleted, err := applyOne(t, `{"a":1}`, ``, Function{Name: "delete"})
	if err != nil || !deleted {
		t.Fatalf("delete: deleted=%v err=%v", deleted, err)
	}
	for state, want := range map[string]storage.Reference{
		`{"r":"abc"}`:         {Kind: storage.RefText, Text: "abc"},
		`{"r":"12.5"}`:        {Kind: storage.RefNumber, Text: "12.5", Number: 12.5},
		`{"r":1700000000000}`: {Kind: storage.RefNumber, Text: "1700000000000", Number: 1700000000000},
	} {
		_, ref, _, err := applyOne(t, state, ``, Function{Name: "setref", TargetSelector: "$.projection.r"})
		if err != nil || ref != want {
			t.Errorf("setref on %s: %+v, %v; want %+v", state, ref, err, want)
		}
	}
	if _, _, _, err := applyOne(t, `{"r":{}}`, ``, Function{Name: "setref", TargetSelector: "$.projection.r"}); err == nil {
		t.Error("setref on an object: no error")
	}
	_, ref, _, err := applyOne(t, `{"r":"x"}`, ``, Function{Name: "setref", TargetSelector: "$.projection.r"}, Function{Name: "clearref"})
	if err != nil || ref.Kind != storage.RefNone {
		t.Errorf("clearref: %+v %v", ref, err)
	}
}

func TestInstanceSizeLimit(t *testing.T) {
	ops, err := compileOps(Function{Name: "append", TargetSelector: "$.projection.l"})
	if err != nil {
		t.Fatal(err)
	}
	in := NewInstance("i", storage.ProjectionState{})
	data := `{"pad":"` + strings.Repeat("x", 1000) + `"}`
	e := &storage.Event{Type: "E", AggregateType: "f", Data: json.RawMessage(data)}
	var a Applier
	applied := 0
	for range 20 {
		if err := a.Apply(in, e, ops, 10_000); err != nil {
			break
		}
		applied++
	}
	if applied != 9 {
		t.Fatalf("applied %d events of ~1 KB under a 10,000-byte limit, want 9", applied)
	}
	if n := len(appendJSON(nil, in.root)); n > 10_000 {
		t.Fatalf("instance is %d bytes, over the limit", n)
	}
}
