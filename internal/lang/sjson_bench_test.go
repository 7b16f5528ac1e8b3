package lang

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/internal/decimal"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// BenchmarkTreeVsSjson measures the engine's way of applying functions
// (decode the instance into a tree once per page of events, apply each
// event to the tree, encode it once at the commit) against editing the
// instance's JSON text in place with tidwall/sjson for every function of
// every event (the design this project started from), on the same folds,
// alternating the two within every iteration so that both see the same
// machine. Each sub-benchmark reports ns/event of both and their ratio
// (sjson/tree; above 1 the tree is faster). Both produce the same JSON,
// checked before timing.
//
//   - small: set, add and inc per event on a three-field instance;
//   - list1000: append of the event to a 1,000-element list of one
//     aggregated instance.
//
// page is how many events one commit covers: 1 when events trickle in one
// at a time, 100 when a projection catches up (a page of the feed).
func BenchmarkTreeVsSjson(b *testing.B) {
	items := make([]string, 1000)
	for i := range items {
		items[i] = fmt.Sprintf(`{"id":"i%d","qty":1}`, i)
	}
	list := `{"items":[` + strings.Join(items, ",") + `]}`
	cases := []struct {
		name, state, data string
		fns               []Function
		sjson             func(doc, ev []byte) ([]byte, error)
	}{
		{"small", `{"status":"new","revenue":"0","count":"0"}`, `{"total":12.5,"status":"placed"}`, []Function{
			f("set", "$.projection.status", "$.event.status"), f("add", "$.projection.revenue", "$.event.total"),
			{Name: "inc", TargetSelector: "$.projection.count"}}, sjsonSmall},
		{"list1000", list, `{"id":"x","qty":1}`, []Function{{Name: "append", TargetSelector: "$.projection.items"}},
			func(doc, ev []byte) ([]byte, error) { return sjson.SetRawBytes(doc, "items.-1", ev) }},
	}
	for _, c := range cases {
		ops, err := compileOps(c.fns...)
		if err != nil {
			b.Fatal(err)
		}
		e := &storage.Event{ID: "e", Type: "E", AggregateType: "f", Data: json.RawMessage(c.data), RecordedAt: time.Now()}
		tree := func(page int) []byte {
			in := &Instance{ID: "i", root: parseObject([]byte(c.state)), size: len(c.state)}
			var a Applier
			for range page {
				if err := a.Apply(in, e, ops, 1<<30); err != nil {
					b.Fatal(err)
				}
			}
			return appendJSON(nil, in.root)
		}
		text := func(page int) []byte {
			doc := []byte(c.state)
			for range page {
				var err error
				if doc, err = c.sjson(doc, e.Data); err != nil {
					b.Fatal(err)
				}
			}
			return doc
		}
		for _, page := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/page=%d", c.name, page), func(b *testing.B) {
				if t, s := tree(page), text(page); !bytes.Equal(t, s) {
					b.Fatalf("the two ways differ:\ntree  %.200s\nsjson %.200s", t, s)
				}
				var treeTime, sjsonTime time.Duration
				for b.Loop() {
					t0 := time.Now()
					tree(page)
					t1 := time.Now()
					text(page)
					treeTime, sjsonTime = treeTime+t1.Sub(t0), sjsonTime+time.Since(t1)
				}
				events := float64(b.N * page)
				b.ReportMetric(float64(treeTime.Nanoseconds())/events, "tree-ns/event")
				b.ReportMetric(float64(sjsonTime.Nanoseconds())/events, "sjson-ns/event")
				b.ReportMetric(float64(sjsonTime)/float64(treeTime), "sjson/tree")
			})
		}
	}
}

// sjsonSmall applies the small case's functions to doc with gjson and
// sjson: set status from the event, add the event's total to revenue and
// increment count, with exact decimals rendered as strings, as the engine
// renders them.
func sjsonSmall(doc, ev []byte) ([]byte, error) {
	doc, err := sjson.SetBytes(doc, "status", gjson.GetBytes(ev, "status").String())
	if err != nil {
		return nil, err
	}
	add := func(doc []byte, path string, by decimal.Dec) ([]byte, error) {
		cur, err := decimal.Parse(gjson.GetBytes(doc, path).String())
		if err != nil {
			return nil, err
		}
		sum, err := cur.Add(by)
		if err != nil {
			return nil, err
		}
		return sjson.SetBytes(doc, path, sum.String())
	}
	total, err := decimal.Parse(gjson.GetBytes(ev, "total").Raw)
	if err != nil {
		return nil, err
	}
	if doc, err = add(doc, "revenue", total); err != nil {
		return nil, err
	}
	return add(doc, "count", decimal.Int(1))
}
