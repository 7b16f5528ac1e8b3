package lang

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

func evalFilter(t *testing.T, expr, at, data string) (bool, error) {
	t.Helper()
	flt, err := parseFilter(expr)
	if err != nil {
		return false, err
	}
	ev := &eventScope{e: &storage.Event{ID: "e", Type: "T", AggregateID: "a", Data: json.RawMessage(data), RecordedAt: time.UnixMilli(5)}}
	sc := filterScope{at: parseObject([]byte(at)), ev: ev}
	return flt.match(&sc), nil
}

func TestFilter(t *testing.T) {
	cases := []struct {
		expr, at, data string
		want           bool
	}{
		{"@.id == $.event.id", `{"id":"1"}`, `{"id":"1"}`, true},
		{"[?(@.id == $.event.id)]", `{"id":"1"}`, `{"id":"2"}`, false},
		{"@.n > 2", `{"n":"10"}`, `{}`, true},    // numbers kept as strings compare as numbers against a number
		{"@.n > '2'", `{"n":"10"}`, `{}`, false}, // two strings compare as text
		{"@.n >= 1.5 && @.n <= 2", `{"n":1.5}`, `{}`, true},
		{"@.a == 1 || @.b == 2", `{"b":2}`, `{}`, true},
		{"!(@.done == true)", `{"done":false}`, `{}`, true},
		{"@.missing != 1", `{}`, `{}`, true},
		{"@.missing == 1", `{}`, `{}`, false},
		{"@.flag", `{"flag":true}`, `{}`, true},
		{"@.flag", `{"flag":null}`, `{}`, false},
		{"$.metadata.eventType == 'T' && $.metadata.timestamp == 5", `{}`, `{}`, true},
		{"@.tags[0] == \"x\"", `{"tags":["x"]}`, `{}`, true},
		{"@['odd key'] == 1", `{"odd key":1}`, `{}`, true},
		{"@.s == null", `{"s":null}`, `{}`, true},
	}
	for _, c := range cases {
		got, err := evalFilter(t, c.expr, c.at, c.data)
		if err != nil || got != c.want {
			t.Errorf("%s on %s: got %v, %v; want %v", c.expr, c.at, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "@.a ==", "(@.a == 1", "@.a == 1)", "@.a === 1", "'open", "@.a[?] == 1", "$.metadata.projectionName == 1", "$.metadata.a.b == 1", "1x == 2", "[?(@.a == 1)"} {
		if _, err := parseFilter(bad); err == nil {
			t.Errorf("parseFilter(%q) accepted it", bad)
		}
	}
}

// FuzzFilter checks that the filter parser never panics, that its limits
// hold, and that an accepted filter evaluates without panicking.
func FuzzFilter(f *testing.F) {
	for _, s := range []string{"@.id == $.event.id", "[?(@.a > 1 && !(@.b))]", "@.x != 'y' || $.metadata.eventId == \"e\"", "((((@))))", "@.a[0]['b'] <= -1.5e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := parseFilter(s)
		if err != nil {
			return
		}
		ev := &eventScope{e: &storage.Event{Data: json.RawMessage(`{"a":[1,{"b":"x"}],"id":"1"}`)}}
		sc := filterScope{at: parseObject([]byte(`{"a":[{"b":2}],"x":"y","id":1}`)), ev: ev}
		flt.match(&sc)
	})
}
