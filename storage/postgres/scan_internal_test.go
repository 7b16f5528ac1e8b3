package postgres

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// scanWithPgx is the reference: the rows read with pgx's Scan, as before
// rowDecoder.
func scanWithPgx(t *testing.T, rows pgx.Rows, lead int) (heads []int64, events []storage.Event) {
	t.Helper()
	defer rows.Close()
	for rows.Next() {
		var e storage.Event
		var data []byte
		var h int64
		var meta string
		dest := []any{&e.Position, &e.AggregateType, &e.AggregateID, &e.ID, &e.Type,
			&data, &e.Version, &e.Sequence, &e.RecordedAt, &e.FeedSequence, &e.EncryptedData, &meta}
		if lead == 1 {
			dest = append([]any{&h}, dest...)
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		heads = append(heads, h)
		if e.Position == 0 && lead == 1 {
			continue
		}
		e.Data = data
		e.RecordedAt = e.RecordedAt.UTC()
		var err error
		if e.Metadata, err = storage.ParseMetadataString(meta); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return heads, events
}

// TestRowDecoderMatchesScan reads the same rows with rowDecoder and with
// pgx's Scan, for every statement that returns events, over events with
// and without data and encrypted data, odd text and timestamps before and
// after 2000, and checks that the decoder took its fast path.
func TestRowDecoderMatchesScan(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	times := []time.Time{
		time.Date(1999, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(2000, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(2026, 11, 23, 18, 0, 0, 123456000, time.UTC),
	}
	big := make([]byte, dataBlock/2) // copied on its own, not into a block
	for i := range big {
		big[i] = 'x'
	}
	big[0], big[len(big)-1] = '"', '"'
	datas := [][]byte{nil, []byte(`{"a":"ü\u2028"}`), big, []byte(`{}`)}
	for i := range 12 {
		typ := []string{"order", "ördér"}[i%2]
		n := 1 + i%3
		events := make([]storage.Event, n)
		for k := range events {
			events[k] = storage.Event{ID: uuid.NewString(), Type: []string{"Placed", "Pläced"}[k%2],
				Data: datas[(i+k)%len(datas)], RecordedAt: times[(i+k)%len(times)]}
			if (i+k)%3 == 0 {
				events[k].EncryptedData = "c2VjcmV0"
			}
			if (i+k)%4 == 1 {
				events[k].Metadata = storage.Metadata{CorrelationID: "c", Values: map[string]string{"k": "ü\u2028"}}
			}
		}
		if _, err := s.Append(ctx, storage.AppendRequest{AggregateType: typ, AggregateID: []string{"a", "b", "c"}[i%3], Events: events}); err != nil {
			t.Fatal(err)
		}
	}
	queries := []struct {
		name string
		lead int
		sql  string
		args []any
	}{
		{"load", 0, s.sql.load, []any{"order", "a"}},
		{"loadRange", 1, s.sql.loadRange, []any{"ördér", "b", int64(1), int64(3), false}},
		{"loadRange to the end", 1, s.sql.loadRange, []any{"ördér", "b", int64(1), int64(1<<63 - 1), true}},
		{"feed", 0, s.sql.feed, []any{int64(2), 100}},
		{"feedType", 1, s.sql.feedType, []any{int64(0), 100, "ördér"}},
		{"feedType empty", 1, s.sql.feedType, []any{int64(1000), 100, "order"}},
		{"feedSeq", 1, s.sql.feedSeq, []any{int64(2), 100, "order", int64(0)}},
	}
	for _, q := range queries {
		t.Run(q.name, func(t *testing.T) {
			// After the watermark statement, as the Storage runs them.
			// Each batch's connection goes back to the pool even when a
			// check fails half-way (Close is idempotent): a failure held
			// it, and the next subtest waited for a connection forever.
			query := func() (pgx.Rows, pgx.BatchResults) {
				rows, br, err := s.queryWM(ctx, q.sql, q.args...)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { rows.Close(); _ = br.Close() })
				return rows, br
			}
			rows, br := query()
			d := rowDecoder{lead: q.lead}
			if !d.checkFormats(rows) {
				rows.Close()
				t.Fatalf("the decoder refused the wire formats of %s: %+v", q.name, rows.FieldDescriptions())
			}
			if err := d.decode(rows); err != nil {
				t.Fatal(err)
			}
			if err := br.Close(); err != nil {
				t.Fatal(err)
			}
			rows, br = query()
			heads, want := scanWithPgx(t, rows, q.lead)
			if err := br.Close(); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d.events, want) {
				t.Errorf("decoded events differ from pgx's Scan:\n got %+v\nwant %+v", d.events, want)
			}
			if q.lead == 1 && !reflect.DeepEqual(d.lead0, heads) {
				t.Errorf("lead column: got %v, want %v", d.lead0, heads)
			}
			if q.name != "feedType empty" && len(want) == 0 {
				t.Errorf("%s returned no event: the comparison proves nothing", q.name)
			}
			for i := range d.events {
				if c := cap(d.events[i].Data); c != len(d.events[i].Data) {
					t.Errorf("event %d: data capacity %d beyond its length %d: an append could overwrite the next event's data", i, c, len(d.events[i].Data))
				}
			}
		})
	}
}

// TestScanFallback reads through a pool whose results come as text, which
// the decoder refuses, so that Load and ReadFeed take pgx's Scan instead:
// with and without a byte budget, they must return what the decoder
// returns.
func TestScanFallback(t *testing.T) {
	s, _ := openBatchTestSchema(t)
	ctx := context.Background()
	var nums numbering // positions as numbered without gaps
	for i := range 6 {
		ev := batchEvent("Big")
		ev.Data = []byte(`{"pad":"` + strings.Repeat("x", i*300) + `"}`)
		if i%2 == 1 {
			ev.EncryptedData = "sealed"
		}
		nums.checkResults(t, s.runBatch(ctx, []storage.AppendRequest{request("x", -1, ev, batchEvent("Small"))}),
			[]appendResult{ok(int64(i+1), int64(2*i+2))})
	}
	loads := []storage.LoadQuery{
		{AggregateType: "t", AggregateID: "x"},
		{AggregateType: "t", AggregateID: "x", AfterVersion: 2, Limit: 3},
		{AggregateType: "t", AggregateID: "x", AfterVersion: 1, MaxBytes: 700},
	}
	feeds := []storage.FeedQuery{
		{Limit: 100},
		{Limit: 100, MaxBytes: 500},
		{AggregateType: "t", After: 3, Limit: 5, MaxBytes: 900},
		{AggregateType: "t", AfterFeedSequence: 2, Limit: 100, MaxBytes: 1},
	}
	read := func() (aggs []storage.Aggregate, pages []storage.FeedPage) {
		for _, q := range loads {
			agg, err := s.Load(ctx, q)
			if err != nil {
				t.Fatalf("Load %+v: %v", q, err)
			}
			aggs = append(aggs, agg)
		}
		for _, q := range feeds {
			page, err := s.ReadFeed(ctx, q)
			if err != nil {
				t.Fatalf("ReadFeed %+v: %v", q, err)
			}
			pages = append(pages, page)
		}
		return aggs, pages
	}
	wantAggs, wantPages := read()
	if !wantPages[1].Truncated || len(wantAggs[2].Events) >= len(wantAggs[0].Events)-2 {
		t.Fatalf("the budgets cut nothing: the comparison proves little")
	}
	cfg := s.pool.Config()
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol // results as text
	text, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer text.Close()
	binary := s.pool
	s.pool = text
	defer func() { s.pool = binary }()
	gotAggs, gotPages := read()
	if !reflect.DeepEqual(gotAggs, wantAggs) {
		t.Errorf("loads through Scan differ from the decoder's:\n got %+v\nwant %+v", gotAggs, wantAggs)
	}
	if !reflect.DeepEqual(gotPages, wantPages) {
		t.Errorf("feed pages through Scan differ from the decoder's:\n got %+v\nwant %+v", gotPages, wantPages)
	}
}
