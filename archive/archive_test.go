package archive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/archive"
	"github.com/stretchr/testify/require"
)

// fill saves batches of several types into st, multi-event ones among
// them, and one aggregate it then deletes; it returns the number of
// batches the feed keeps.
func fill(t *testing.T, st *eventstore.Store) int {
	t.Helper()
	ctx := context.Background()
	batches := 0
	save := func(typ, id string, events ...eventstore.NewEvent) {
		t.Helper()
		_, err := st.Save(ctx, typ, id, events, nil)
		require.NoError(t, err)
		batches++
	}
	ev := func(typ, data string) eventstore.NewEvent {
		e := eventstore.NewEvent{ID: eventstore.NewEventID(), Type: typ}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		return e
	}
	for i := range 5 {
		id := fmt.Sprintf("o-%d", i)
		save("order", id, ev("Placed", fmt.Sprintf(`{"n":%d,"text":"a <b> & \"c\" é"}`, i)), ev("Priced", `{"amount":"12.50"}`))
		save("invoice", "i-"+id, ev("Issued", ""))
		paid := ev("Paid", `{"nested":{"deep":[1,2,{"x":null}]}}`)
		paid.Metadata = eventstore.Metadata{CorrelationID: "corr-" + id, CausationID: "cmd-" + id, Values: map[string]string{"user": "u é", "k": id}}
		save("order", id, paid)
	}
	enc := ev("Secret", "")
	enc.EncryptedData = "opaque-ciphertext=="
	save("invoice", "i-enc", enc, ev("Noted", `{}`))
	save("cart", "c-gone", ev("Added", `{"sku":"x"}`))
	save("cart", "c-gone", ev("Added", `{"sku":"y"}`))
	batches -= 2
	require.NoError(t, st.DeleteAggregate(ctx, "cart", "c-gone"))
	save("cart", "c-kept", ev("Added", `{"sku":"z"}`), ev("Added", `{"sku":"w"}`), ev("Removed", `{"sku":"z"}`))
	return batches
}

func export(t *testing.T, st *eventstore.Store) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := archive.Export(context.Background(), st, archive.NewWriter(&buf), 0)
	require.NoError(t, err)
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	pairs := [][2]backend{
		{memoryBackend, sqliteBackend},
		{sqliteBackend, memoryBackend},
		{memoryBackend, postgresBackend},
		{postgresBackend, sqliteBackend},
	}
	for _, p := range pairs {
		t.Run(p[0].name+"_to_"+p[1].name, func(t *testing.T) {
			ctx := context.Background()
			src, dst := p[0].open(t), p[1].open(t)
			batches := fill(t, src)
			data := export(t, src)
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			require.Len(t, lines, 1+batches, "the header and one line per batch")
			require.JSONEq(t, `{"format":"eventstore-archive","version":1}`, lines[0])
			require.NotContains(t, string(data), "c-gone", "a deleted aggregate is not exported")

			stats, err := archive.Import(ctx, dst, archive.NewReader(bytes.NewReader(data)))
			require.NoError(t, err)
			require.Equal(t, archive.Stats{Batches: int64(batches), Events: 25}, stats)
			require.NoError(t, archive.Verify(ctx, src, dst))
			require.NoError(t, archive.Verify(ctx, dst, src))

			for _, key := range [][2]string{{"order", "o-3"}, {"invoice", "i-enc"}, {"cart", "c-kept"}} {
				a, err := src.Load(ctx, key[0], key[1])
				require.NoError(t, err)
				b, err := dst.Load(ctx, key[0], key[1])
				require.NoError(t, err)
				require.Equal(t, a.Version, b.Version)
				require.Len(t, b.Events, len(a.Events))
				for i := range a.Events {
					x, y := a.Events[i], b.Events[i]
					require.Equal(t, x.ID, y.ID)
					require.Equal(t, x.Type, y.Type)
					require.Equal(t, string(x.Data), string(y.Data))
					require.Equal(t, x.EncryptedData, y.EncryptedData)
					require.Equal(t, x.Version, y.Version)
					require.Equal(t, x.Metadata, y.Metadata)
				}
			}
			gone, err := dst.Exists(ctx, "cart", "c-gone")
			require.NoError(t, err)
			require.False(t, gone)

			// The target exports the same archive: recorded times kept.
			again := export(t, dst)
			require.Equal(t, string(data), string(again))
			for _, key := range [][2]string{{"order", "o-3"}, {"cart", "c-kept"}} {
				a, err := src.Load(ctx, key[0], key[1])
				require.NoError(t, err)
				b, err := dst.Load(ctx, key[0], key[1])
				require.NoError(t, err)
				for i := range a.Events {
					require.Equal(t, a.Events[i].RecordedAt, b.Events[i].RecordedAt)
				}
			}
		})
	}
}

// An import stopped by a truncated archive, run again on the whole one,
// ends with one copy of every event.
func TestImportInterruptedAndRunAgain(t *testing.T) {
	for _, dstb := range []backend{memoryBackend, sqliteBackend, postgresBackend} {
		t.Run(dstb.name, func(t *testing.T) {
			ctx := context.Background()
			src, dst := memoryBackend.open(t), dstb.open(t)
			batches := fill(t, src)
			data := export(t, src)
			lines := strings.SplitAfter(string(data), "\n")
			cut := strings.Join(lines[:7], "") + lines[7][:len(lines[7])/2] // the header, 6 batches, half a line

			stats, err := archive.Import(ctx, dst, archive.NewReader(strings.NewReader(cut)))
			require.ErrorIs(t, err, eventstore.ErrInvalid)
			require.ErrorContains(t, err, "line 8: the line is truncated")
			require.Equal(t, int64(6), stats.Batches)

			stats, err = archive.Import(ctx, dst, archive.NewReader(bytes.NewReader(data)))
			require.NoError(t, err)
			require.Equal(t, int64(6), stats.Duplicates)
			require.Equal(t, int64(batches-6), stats.Batches)
			require.NoError(t, archive.Verify(ctx, src, dst))

			stats, err = archive.Import(ctx, dst, archive.NewReader(bytes.NewReader(data)))
			require.NoError(t, err)
			require.Equal(t, archive.Stats{Duplicates: int64(batches)}, stats)
			fa, err := src.Feeds(ctx)
			require.NoError(t, err)
			fb, err := dst.Feeds(ctx)
			require.NoError(t, err)
			require.ElementsMatch(t, fa, fb)
		})
	}
}

func TestImportVersionDoesNotFollow(t *testing.T) {
	ctx := context.Background()
	dst := memoryBackend.open(t)
	id1, id2 := eventstore.NewEventID(), eventstore.NewEventID()
	in := `{"format":"eventstore-archive","version":1}
{"aggregateType":"order","aggregateId":"o-1","version":1,"recordedAt":"2026-12-01T10:00:00Z","events":[{"id":"` + id1 + `","type":"Placed"}]}
{"aggregateType":"order","aggregateId":"o-1","version":3,"recordedAt":"2026-12-01T10:00:01Z","events":[{"id":"` + id2 + `","type":"Paid"}]}
`
	stats, err := archive.Import(ctx, dst, archive.NewReader(strings.NewReader(in)))
	require.ErrorIs(t, err, eventstore.ErrConflict)
	require.ErrorContains(t, err, "line 3: batch order/o-1 version 3 does not follow the stored version 1")
	require.Equal(t, archive.Stats{Batches: 1, Events: 1}, stats)
	agg, err := dst.Load(ctx, "order", "o-1")
	require.NoError(t, err, "what was imported before stays")
	require.Equal(t, int64(1), agg.Version)
}

func TestReaderErrorsNameTheLine(t *testing.T) {
	const hdr = `{"format":"eventstore-archive","version":1}` + "\n"
	batch := func(s string) string {
		return `{"aggregateType":"order","aggregateId":"o-1","version":1,"recordedAt":"2026-12-01T10:00:00Z",` + s + "}\n"
	}
	good := batch(`"events":[{"id":"5b0e7c1a-3f0d-4c1e-9a59-1d2f3e4a5b01","type":"Placed","data":{"a":1}}]`)
	for name, c := range map[string]struct{ in, msg string }{
		"empty":         {"", "line 1: no header"},
		"wrong version": {`{"format":"eventstore-archive","version":2}` + "\n" + good, "line 1: archive version 2, this reader reads version 1"},
		"wrong format":  {`{"format":"something-else","version":1}` + "\n", "line 1: not an archive"},
		"not json":      {"hello\n", "line 1: not an archive"},
		"truncated":     {hdr + good + good[:40], "line 3: the line is truncated"},
		"unknown field": {hdr + good + batch(`"events":[],"extra":1`), `line 3: not a batch: json: unknown field "extra"`},
		"no events":     {hdr + batch(`"events":[]`), "line 2: order/o-1: a batch has at least one event"},
		"data array":    {hdr + batch(`"events":[{"id":"x","type":"T","data":[1]}]`), "line 2: order/o-1: event 0: data must be a JSON object"},
		"version 0":     {hdr + strings.Replace(good, `"version":1`, `"version":0`, 1), "line 2: order/o-1: version must be at least 1"},
		"two values":    {hdr + strings.TrimSuffix(good, "\n") + " {}\n", "line 2: not a batch: more than one JSON value"},
	} {
		t.Run(name, func(t *testing.T) {
			r := archive.NewReader(strings.NewReader(c.in))
			var err error
			for err == nil {
				_, err = r.Next()
			}
			require.ErrorIs(t, err, eventstore.ErrInvalid)
			require.ErrorContains(t, err, c.msg)
			_, again := r.Next()
			require.Equal(t, err, again, "the error sticks")
		})
	}
}

func TestReaderRefusesALongLine(t *testing.T) {
	in := `{"format":"eventstore-archive","version":1}` + "\n" + strings.Repeat(" ", archive.MaxLineBytes+1) + "\n"
	_, err := archive.NewReader(strings.NewReader(in)).Next()
	require.ErrorIs(t, err, eventstore.ErrInvalid)
	require.ErrorContains(t, err, fmt.Sprintf("line 2: the line is longer than %d bytes", archive.MaxLineBytes))
}

func TestWriterReaderKeepEveryField(t *testing.T) {
	in := []archive.Batch{{
		AggregateType: "order", AggregateID: "o-1", Version: 7,
		RecordedAt: time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC),
		Events: []archive.Event{
			{ID: "5b0e7c1a-3f0d-4c1e-9a59-1d2f3e4a5b01", Type: "Placed", Data: json.RawMessage(`{"a":"<&>"}`),
				Metadata: eventstore.Metadata{CorrelationID: "corr", CausationID: "cause", Values: map[string]string{"traceparent": "00-x", "k": "v"}}},
			{ID: "5b0e7c1a-3f0d-4c1e-9a59-1d2f3e4a5b02", Type: "Sealed", EncryptedData: "zzz"},
		},
	}, {
		AggregateType: "cart", AggregateID: "c-1", Version: 1,
		RecordedAt: time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC),
		Events:     []archive.Event{{ID: "5b0e7c1a-3f0d-4c1e-9a59-1d2f3e4a5b03", Type: "Added"}},
	}}
	var buf bytes.Buffer
	w := archive.NewWriter(&buf)
	for _, b := range in {
		require.NoError(t, w.WriteBatch(b))
	}
	require.NoError(t, w.Flush())
	require.Contains(t, buf.String(), `"metadata":{"causationId":"cause","correlationId":"corr","k":"v","traceparent":"00-x"}`)
	require.Contains(t, buf.String(), `{"a":"<&>"}`)
	r := archive.NewReader(&buf)
	var out []archive.Batch
	for {
		b, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		out = append(out, b)
	}
	require.Equal(t, in, out)
	require.Equal(t, 3, r.Line())
}

func TestWriterRefusesABadBatch(t *testing.T) {
	var buf bytes.Buffer
	w := archive.NewWriter(&buf)
	err := w.WriteBatch(archive.Batch{AggregateType: "order", AggregateID: "o-1", Version: 1})
	require.ErrorIs(t, err, eventstore.ErrInvalid)
	require.NoError(t, w.Flush())
	require.Equal(t, `{"format":"eventstore-archive","version":1}`+"\n", buf.String(), "the header alone")
	_, err = archive.NewReader(&buf).Next()
	require.Equal(t, io.EOF, err)
}

// Export goes on from the cursor it returned: the second archive holds
// only what was saved after the first.
func TestExportResumes(t *testing.T) {
	ctx := context.Background()
	src, dst := sqliteBackend.open(t), memoryBackend.open(t)
	fill(t, src)
	var first, second bytes.Buffer
	next, err := archive.Export(ctx, src, archive.NewWriter(&first), 0)
	require.NoError(t, err)
	head, err := src.FeedHead(ctx, "")
	require.NoError(t, err)
	require.Equal(t, head, next)
	_, err = src.Save(ctx, "order", "o-late", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Placed"}}, nil)
	require.NoError(t, err)
	_, err = archive.Export(ctx, src, archive.NewWriter(&second), next)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(second.String(), "\n"), "the header and the new batch")
	require.Contains(t, second.String(), `"aggregateId":"o-late"`)

	for _, a := range []*bytes.Buffer{&first, &second} {
		_, err := archive.Import(ctx, dst, archive.NewReader(a))
		require.NoError(t, err)
	}
	require.NoError(t, archive.Verify(ctx, src, dst))
}

func TestExportEmptyStore(t *testing.T) {
	var buf bytes.Buffer
	next, err := archive.Export(context.Background(), memoryBackend.open(t), archive.NewWriter(&buf), 0)
	require.NoError(t, err)
	require.Zero(t, next)
	require.Equal(t, `{"format":"eventstore-archive","version":1}`+"\n", buf.String())
}

func TestVerifyFindsTheFirstDifference(t *testing.T) {
	ctx := context.Background()
	id := eventstore.NewEventID()
	for name, c := range map[string]struct {
		a, b func(st *eventstore.Store)
		msg  string
	}{
		"missing type": {
			a:   func(st *eventstore.Store) { saveOne(t, st, "order", "o-1", id, `{}`) },
			b:   func(st *eventstore.Store) {},
			msg: "aggregate type order is only in the first store",
		},
		"other counts": {
			a: func(st *eventstore.Store) { saveOne(t, st, "order", "o-1", id, `{}`) },
			b: func(st *eventstore.Store) {
				saveOne(t, st, "order", "o-1", id, `{}`)
				saveOne(t, st, "order", "o-2", eventstore.NewEventID(), `{}`)
			},
			msg: "aggregate type order: 1 aggregates, 1 batches, 1 events against 2, 2, 2",
		},
		"other aggregate": {
			a:   func(st *eventstore.Store) { saveOne(t, st, "order", "o-1", id, `{}`) },
			b:   func(st *eventstore.Store) { saveOne(t, st, "order", "o-2", id, `{}`) },
			msg: "aggregate order/o-1 is only in the first store",
		},
		"other data": {
			a:   func(st *eventstore.Store) { saveOne(t, st, "order", "o-1", id, `{"n":1}`) },
			b:   func(st *eventstore.Store) { saveOne(t, st, "order", "o-1", id, `{"n":2}`) },
			msg: "aggregate order/o-1: its events differ",
		},
		"other metadata": {
			a: func(st *eventstore.Store) {
				saveMeta(t, st, id, eventstore.Metadata{Values: map[string]string{"k": "1"}})
			},
			b: func(st *eventstore.Store) {
				saveMeta(t, st, id, eventstore.Metadata{Values: map[string]string{"k": "2"}})
			},
			msg: "aggregate order/o-1: its events differ",
		},
		"metadata on one side": {
			a:   func(st *eventstore.Store) { saveMeta(t, st, id, eventstore.Metadata{CorrelationID: "c"}) },
			b:   func(st *eventstore.Store) { saveMeta(t, st, id, eventstore.Metadata{}) },
			msg: "aggregate order/o-1: its events differ",
		},
		"other id": {
			a:   func(st *eventstore.Store) { saveOne(t, st, "order", "o-1", id, `{}`) },
			b:   func(st *eventstore.Store) { saveOne(t, st, "order", "o-1", eventstore.NewEventID(), `{}`) },
			msg: "aggregate order/o-1: its events differ",
		},
	} {
		t.Run(name, func(t *testing.T) {
			a, b := memoryBackend.open(t), sqliteBackend.open(t)
			c.a(a)
			c.b(b)
			err := archive.Verify(ctx, a, b)
			require.ErrorIs(t, err, archive.ErrDifferent)
			require.ErrorContains(t, err, c.msg)
		})
	}
}

func saveMeta(t *testing.T, st *eventstore.Store, eventID string, m eventstore.Metadata) {
	t.Helper()
	_, err := st.Save(context.Background(), "order", "o-1", []eventstore.NewEvent{{ID: eventID, Type: "T", Metadata: m}}, nil)
	require.NoError(t, err)
}

func saveOne(t *testing.T, st *eventstore.Store, typ, id, eventID, data string) {
	t.Helper()
	_, err := st.Save(context.Background(), typ, id, []eventstore.NewEvent{{ID: eventID, Type: "T", Data: json.RawMessage(data)}}, nil)
	require.NoError(t, err)
}

// TestImportStopsInALaterRun checks Import's guarantees on an archive of
// several runs (a run is saved while the next is read): a batch whose
// version does not follow, or a truncated line, in a later run stops the
// import with its line, every batch before it imported and none after,
// and the import run again ends with one copy of every batch.
func TestImportStopsInALaterRun(t *testing.T) {
	const aggs, versions = 250, 10 // 2,500 batches, 10 aggregates' versions interleaved as a feed is
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	build := func(gap int) []byte { // gap: the batch whose version skips one, or -1
		var buf bytes.Buffer
		w := archive.NewWriter(&buf)
		for i := range aggs * versions {
			v := int64(i/aggs + 1)
			if i == gap {
				v++
			}
			require.NoError(t, w.WriteBatch(archive.Batch{AggregateType: "order", AggregateID: fmt.Sprint("o-", i%aggs), Version: v,
				RecordedAt: at.Add(time.Duration(i) * time.Second),
				Events:     []archive.Event{{ID: eventstore.NewEventID(), Type: "Happened", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}}}))
		}
		require.NoError(t, w.Flush())
		return buf.Bytes()
	}
	count := func(t *testing.T, st *eventstore.Store) int {
		n := 0
		for after := int64(0); ; {
			res, err := st.ReadFeed(context.Background(), "", after, &eventstore.FeedOptions{Limit: 1000})
			require.NoError(t, err)
			n += len(res.Entries)
			if !res.HasMore {
				return n
			}
			after = res.Next
		}
	}
	for _, dstb := range []backend{memoryBackend, sqliteBackend} {
		t.Run(dstb.name, func(t *testing.T) {
			ctx := context.Background()
			dst := dstb.open(t)
			const gap = 1700 // in the second run, with the first saved and the third read
			stats, err := archive.Import(ctx, dst, archive.NewReader(bytes.NewReader(build(gap))))
			require.ErrorIs(t, err, eventstore.ErrConflict)
			require.ErrorContains(t, err, fmt.Sprintf("line %d: batch order/o-%d version %d does not follow", gap+2, gap%aggs, gap/aggs+2))
			require.Equal(t, archive.Stats{Batches: gap, Events: gap}, stats)
			require.Equal(t, gap, count(t, dst), "every batch before the bad one imported, none after")

			data := build(-1)
			lines := strings.SplitAfter(string(data), "\n")
			const cut = 2300 // batches before the truncated line
			truncated := strings.Join(lines[:1+cut], "") + lines[1+cut][:20]
			dst = dstb.open(t)
			stats, err = archive.Import(ctx, dst, archive.NewReader(strings.NewReader(truncated)))
			require.ErrorIs(t, err, eventstore.ErrInvalid)
			require.ErrorContains(t, err, fmt.Sprintf("line %d: the line is truncated", cut+2))
			require.Equal(t, archive.Stats{Batches: cut, Events: cut}, stats)
			require.Equal(t, cut, count(t, dst))

			stats, err = archive.Import(ctx, dst, archive.NewReader(bytes.NewReader(data)))
			require.NoError(t, err)
			require.Equal(t, archive.Stats{Batches: aggs*versions - cut, Events: aggs*versions - cut, Duplicates: cut}, stats)
			require.Equal(t, aggs*versions, count(t, dst))
		})
	}
}

// failAfter is a writer that fails once it took n bytes.
type failAfter struct {
	w io.Writer
	n int
}

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k, _ := f.w.Write(p[:f.n])
		f.n = 0
		return k, io.ErrShortWrite
	}
	f.n -= len(p)
	return f.w.Write(p)
}

// TestExportChunks checks an export of several chunks (Export reads
// chunks of feed positions ahead, four at a time, each as one range of
// the feed) against the feed read page by page: the same batches in the
// same order, none lost or repeated where batches of 1 to 3 events and
// deleted aggregates straddle the chunks' ends, also when the export
// fails midway and is resumed from the cursor it returned.
func TestExportChunks(t *testing.T) {
	ctx := context.Background()
	for _, b := range []backend{memoryBackend, sqliteBackend, postgresBackend} {
		t.Run(b.name, func(t *testing.T) {
			src := b.open(t)
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var group []eventstore.ImportedBatch
			for i := range 9_000 {
				n := 1 + i%3
				events := make([]eventstore.NewEvent, n)
				for j := range events {
					events[j] = eventstore.NewEvent{ID: eventstore.NewEventID(), Type: "Happened"}
				}
				group = append(group, eventstore.ImportedBatch{AggregateType: []string{"order", "cart"}[i%2], AggregateID: fmt.Sprint("a-", i),
					Events: events, RecordedAt: at})
				if len(group) == 1000 {
					_, err := src.SaveImported(ctx, group)
					require.NoError(t, err)
					group = group[:0]
				}
			}
			for i := 0; i < 9_000; i += 37 { // gaps, some across the chunks' ends
				require.NoError(t, src.DeleteAggregate(ctx, []string{"order", "cart"}[i%2], fmt.Sprint("a-", i)))
			}
			// The feed read page by page, written as Export wrote it before.
			var want bytes.Buffer
			w := archive.NewWriter(&want)
			for after := int64(0); ; {
				res, err := src.ReadFeed(ctx, "", after, &eventstore.FeedOptions{Limit: 1000})
				require.NoError(t, err)
				for _, e := range res.Entries {
					bt := archive.Batch{AggregateType: e.AggregateType, AggregateID: e.AggregateID, Version: e.Version, RecordedAt: e.RecordedAt}
					for _, ev := range e.Events {
						bt.Events = append(bt.Events, archive.Event{ID: ev.ID, Type: ev.Type, Data: ev.Data})
					}
					require.NoError(t, w.WriteBatch(bt))
				}
				if !res.HasMore {
					break
				}
				after = res.Next
			}
			require.NoError(t, w.Flush())
			head, err := src.FeedHead(ctx, "")
			require.NoError(t, err)
			require.Greater(t, head, int64(2*8000), "three chunks")

			var got bytes.Buffer
			next, err := archive.Export(ctx, src, archive.NewWriter(&got), 0)
			require.NoError(t, err)
			require.Equal(t, head, next)
			require.Equal(t, want.String(), got.String())

			for _, cut := range []int{500_000, 1_500_000} {
				var first, second bytes.Buffer
				next, err := archive.Export(ctx, src, archive.NewWriter(&failAfter{w: &first, n: cut}), 0)
				require.Error(t, err)
				// The lines that reached the writer whole are the archive's
				// first; the export resumed from next writes the lines after
				// those of the pages written before the failing one.
				whole := first.String()[:strings.LastIndex(first.String(), "\n")+1]
				require.True(t, strings.HasPrefix(want.String(), whole), "cut at %d bytes", cut)
				_, err = archive.Export(ctx, src, archive.NewWriter(&second), next)
				require.NoError(t, err)
				rest := second.String()[strings.Index(second.String(), "\n")+1:]
				require.True(t, strings.HasSuffix(want.String(), rest), "cut at %d bytes, resumed after %d", cut, next)
				lost := strings.Count(want.String(), "\n") - strings.Count(whole, "\n") - strings.Count(rest, "\n")
				require.True(t, lost <= 0 && lost > -1000, "cut at %d bytes, resumed after %d: %d lines lost (negative: repeated, those of the failing page)", cut, next, lost)
				require.NotZero(t, next, "cut at %d bytes: the pages before the failing one were written", cut)
			}
		})
	}
}
