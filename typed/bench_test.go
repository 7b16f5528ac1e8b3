package typed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/typed"
)

// The benchmarks compare the typed path with the same work through
// json.RawMessage, the payload encoded and decoded by the caller with
// encoding/json, on the memory backend (so that the codec layer is what
// differs). BenchmarkAgainstRaw alternates the two in every iteration and
// reports typed/raw, the ratio of their median times in one run:
//
//	go test ./typed -run '^$' -bench AgainstRaw -benchtime 2000x -count 5

type benchLine struct {
	SKU      string  `json:"sku"`
	Name     string  `json:"name"`
	Qty      int     `json:"qty"`
	Price    float64 `json:"price"`
	Discount float64 `json:"discount"`
}

type benchNote struct {
	Author string   `json:"author"`
	Text   string   `json:"text"`
	Tags   []string `json:"tags"`
}

const (
	benchBatch  = 10  // events per save
	benchEvents = 100 // events per load
)

func benchEventsOf(i int) []any {
	out := make([]any, benchBatch)
	for j := range out {
		if j%2 == 0 {
			out[j] = benchLine{SKU: fmt.Sprintf("sku-%d-%d", i, j), Name: "a reasonably named product", Qty: j + 1, Price: 12.5, Discount: 0.1}
		} else {
			out[j] = benchNote{Author: "someone@example.com", Text: "please leave it at the door", Tags: []string{"gift", "fragile"}}
		}
	}
	return out
}

// rawSave is the baseline of a save: the caller encodes each value and
// makes its id.
func rawSave(ctx context.Context, st *eventstore.Store, id string, values []any) error {
	batch := make([]eventstore.NewEvent, len(values))
	for i, v := range values {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		typ := "Line"
		if _, ok := v.(benchNote); ok {
			typ = "Note"
		}
		batch[i] = eventstore.NewEvent{ID: eventstore.NewEventID(), Type: typ, Data: data}
	}
	_, err := st.Save(ctx, "order", id, batch, nil)
	return err
}

var sink any

// rawLoad is the baseline of a load: the caller decodes each event by its
// type.
func rawLoad(ctx context.Context, st *eventstore.Store, id string) error {
	agg, err := st.Load(ctx, "order", id)
	if err != nil {
		return err
	}
	for _, e := range agg.Events {
		switch e.Type {
		case "Line":
			var v benchLine
			if err := json.Unmarshal(e.Data, &v); err != nil {
				return err
			}
			sink = v
		case "Note":
			var v benchNote
			if err := json.Unmarshal(e.Data, &v); err != nil {
				return err
			}
			sink = v
		default:
			return errors.New("unknown type " + e.Type)
		}
	}
	return nil
}

func typedLoad(ctx context.Context, ts *typed.Store, id string) error {
	for ev, err := range ts.Load(ctx, "order", id) {
		if err != nil {
			return err
		}
		sink = ev.Value
	}
	return nil
}

func benchStores(b *testing.B) (*eventstore.Store, *typed.Store) {
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	reg := typed.NewRegistry(nil)
	if err := errors.Join(typed.Register[benchLine](reg, "Line"), typed.Register[benchNote](reg, "Note")); err != nil {
		b.Fatal(err)
	}
	return st, typed.NewStore(st, reg)
}

// seedLoad saves an aggregate of benchEvents events to load.
func seedLoad(b *testing.B, ts *typed.Store) {
	for i := range benchEvents / benchBatch {
		if _, err := ts.Save(context.Background(), "order", "load", benchEventsOf(i), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSave: one save of benchBatch events, typed and raw.
func BenchmarkSave(b *testing.B) {
	ctx := context.Background()
	values := benchEventsOf(0)
	b.Run("raw", func(b *testing.B) {
		st, _ := benchStores(b)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := rawSave(ctx, st, fmt.Sprint("a-", i%1000), values); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("typed", func(b *testing.B) {
		_, ts := benchStores(b)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := ts.Save(ctx, "order", fmt.Sprint("a-", i%1000), values, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLoad: one load of benchEvents events, decoded, typed and raw.
func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	st, ts := benchStores(b)
	seedLoad(b, ts)
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := rawLoad(ctx, st, "load"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := typedLoad(ctx, ts, "load"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAgainstRaw runs the raw and the typed operation alternately in
// every iteration (which goes first alternates too), so that both see the
// same machine, and reports the ratio of their total times.
func BenchmarkAgainstRaw(b *testing.B) {
	ctx := context.Background()
	values := benchEventsOf(0)
	b.Run("save", func(b *testing.B) {
		st, ts := benchStores(b)
		raw := func(i int) error { return rawSave(ctx, st, fmt.Sprint("r-", i%1000), values) }
		typ := func(i int) error {
			_, err := ts.Save(ctx, "order", fmt.Sprint("t-", i%1000), values, nil)
			return err
		}
		alternate(b, raw, typ)
	})
	b.Run("load", func(b *testing.B) {
		st, ts := benchStores(b)
		seedLoad(b, ts)
		alternate(b, func(int) error { return rawLoad(ctx, st, "load") }, func(int) error { return typedLoad(ctx, ts, "load") })
	})
}

func alternate(b *testing.B, raw, typ func(i int) error) {
	alternateNamed(b, "raw", "typed", raw, typ)
}

// alternateNamed runs base and other alternately and reports the ratio of
// their medians as other/base.
func alternateNamed(b *testing.B, baseName, otherName string, raw, typ func(i int) error) {
	var rawTimes, typedTimes []time.Duration
	for i := 0; b.Loop(); i++ {
		first, second := raw, typ
		if i%2 == 1 {
			first, second = typ, raw
		}
		t0 := time.Now()
		if err := first(i); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := second(i); err != nil {
			b.Fatal(err)
		}
		d0, d1 := t1.Sub(t0), time.Since(t1)
		if i%2 == 1 {
			d0, d1 = d1, d0
		}
		rawTimes, typedTimes = append(rawTimes, d0), append(typedTimes, d1)
	}
	// Medians, so that a collection or another process's burst landing
	// on one side now and then does not decide the ratio.
	rawMedian, typedMedian := median(rawTimes), median(typedTimes)
	b.ReportMetric(float64(typedMedian)/float64(rawMedian), otherName+"/"+baseName)
	b.ReportMetric(float64(rawMedian.Nanoseconds()), baseName+"-median-ns")
	b.ReportMetric(float64(typedMedian.Nanoseconds()), otherName+"-median-ns")
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkSnapshotLoad: Repository.Load of a 100,000-event aggregate
// from its snapshot at its last 100 events, against Load of a 100-event
// aggregate (no snapshot), alternating; both of saves of 10 events.
// Reports snapshot/small:
//
//	go test ./typed -run '^$' -bench SnapshotLoad -benchtime 2000x -count 5
func BenchmarkSnapshotLoad(b *testing.B) {
	ctx := context.Background()
	_, ts := benchStores(b)
	type counts struct{ Lines, Notes int }
	apply := func(c *counts, e typed.Event) error {
		switch e.Value.(type) {
		case benchLine:
			c.Lines++
		case benchNote:
			c.Notes++
		}
		return nil
	}
	big := typed.NewRepository(ts, "order", apply, &typed.RepositoryOptions{SnapshotEvery: 1 << 30})
	small := typed.NewRepository(ts, "order", apply, nil)
	const bigEvents = 100_000
	var last typed.Aggregate[counts]
	for i := range bigEvents / benchBatch {
		res, err := ts.Save(ctx, "order", "big", benchEventsOf(i), nil)
		if err != nil {
			b.Fatal(err)
		}
		if i == bigEvents/benchBatch-benchEvents/benchBatch-1 {
			last = typed.Aggregate[counts]{ID: "big", Version: res.Version}
		}
	}
	// The snapshot's state is not what 99,900 events fold to, which a
	// load from it does not check: the cost is what is measured.
	if err := big.SaveSnapshot(ctx, last); err != nil {
		b.Fatal(err)
	}
	for i := range benchEvents / benchBatch {
		if _, err := ts.Save(ctx, "order", "small", benchEventsOf(i), nil); err != nil {
			b.Fatal(err)
		}
	}
	check := func(a typed.Aggregate[counts], err error) error {
		if err == nil && a.State.Lines+a.State.Notes != benchEvents {
			err = fmt.Errorf("folded %d events, want %d", a.State.Lines+a.State.Notes, benchEvents)
		}
		return err
	}
	alternateNamed(b, "small", "snapshot",
		func(int) error { return check(small.Load(ctx, "small")) },
		func(int) error { return check(big.Load(ctx, "big")) })
}
