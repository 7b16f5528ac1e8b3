package lang

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// BenchmarkFunctions measures applying one event's functions to an
// instance held as a tree (what CatchUp does between a page's load and its
// commit), and reports function applications per second.
func BenchmarkFunctions(b *testing.B) {
	list := make([]string, 100)
	for i := range list {
		list[i] = fmt.Sprintf(`{"id":"t%d","done":false}`, i)
	}
	todos := `{"todos":[` + strings.Join(list, ",") + `]}`
	cases := []struct {
		name  string
		state string
		data  string
		fns   []Function
	}{
		{"set+add+inc", `{}`, `{"total":12.5,"status":"placed"}`, []Function{
			f("set", "$.projection.status", "$.event.status"), f("add", "$.projection.revenue", "$.event.total"), {Name: "inc", TargetSelector: "$.projection.count"}}},
		{"merge", `{"a":1}`, `{"b":2,"c":"x","d":{"e":true}}`, []Function{{Name: "merge"}}},
		{"append-to-100", todos, `{"id":"t100","done":false}`, []Function{{Name: "append", TargetSelector: "$.projection.todos"}, {Name: "unset", TargetSelector: "$.projection.todos[0]"}}},
		{"filtered-set-in-100", todos, `{"id":"t57"}`, []Function{{Name: "set", TargetSelector: "$.projection.todos[?].done", TargetFilter: "@.id == $.event.id", RawData: json.RawMessage(`true`)}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ops, err := compileOps(c.fns...)
			if err != nil {
				b.Fatal(err)
			}
			in := &Instance{ID: "i", root: parseObject([]byte(c.state)), size: len(c.state)}
			e := &storage.Event{ID: "e", Type: "E", AggregateType: "f", Data: json.RawMessage(c.data), RecordedAt: time.Now()}
			var a Applier
			b.ReportAllocs()
			for b.Loop() {
				if err := a.Apply(in, e, ops, 1<<30); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(c.fns)*b.N)/b.Elapsed().Seconds(), "funcs/s")
		})
	}
}
