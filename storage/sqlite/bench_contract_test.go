package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
)

// appendRequests returns n requests of perSave events each, to aggregates
// "<prefix>0" … "<prefix>n-1" of type acct.
func appendRequests(prefix string, n, perSave int) []storage.AppendRequest {
	now := time.Now().UTC().Truncate(time.Microsecond)
	reqs := make([]storage.AppendRequest, n)
	for i := range reqs {
		reqs[i] = storage.AppendRequest{AggregateType: "acct", AggregateID: prefix + strconv.Itoa(i)}
		for range perSave {
			reqs[i].Events = append(reqs[i].Events, storage.Event{
				ID: uuid.NewString(), Type: "Deposited", Data: json.RawMessage(benchData), RecordedAt: now,
			})
		}
	}
	return reqs
}

// BenchmarkInterleavedAppendAll alternates, on one storage and from one
// goroutine, one AppendAll of 10 aggregates × 10 events and 10 separate
// Appends of the same shape; reports both rates and their ratio.
func BenchmarkInterleavedAppendAll(b *testing.B) {
	const aggregates, perSave = 10, 10
	ctx := context.Background()
	s := openTemp(b)
	var allTime, sepTime time.Duration
	i := 0
	for b.Loop() {
		all := appendRequests(fmt.Sprintf("all%d-", i), aggregates, perSave)
		sep := appendRequests(fmt.Sprintf("sep%d-", i), aggregates, perSave)
		i++
		t0 := time.Now()
		if _, err := s.AppendAll(ctx, all); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for _, req := range sep {
			if _, err := s.Append(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
		allTime += t1.Sub(t0)
		sepTime += time.Since(t1)
	}
	events := float64(b.N * aggregates * perSave)
	b.ReportMetric(events/allTime.Seconds(), "appendall-events/s")
	b.ReportMetric(events/sepTime.Seconds(), "separate-events/s")
	b.ReportMetric(sepTime.Seconds()/allTime.Seconds(), "gain-x")
}

// BenchmarkInterleavedRawAppendAll is BenchmarkInterleavedAppendAll done by
// the raw engine (rawWriter: plain single-row INSERTs through the same
// driver into an identical events table, one transaction per save): one
// transaction of 10 aggregates × 10 events against 10 of 10 events each,
// alternated; reports both rates and their ratio, the most the store's
// bulk path could gain with this schema and durability.
func BenchmarkInterleavedRawAppendAll(b *testing.B) {
	const aggregates, perSave = 10, 10
	ctx := context.Background()
	w := newRawWriter(b)
	var allTime, sepTime time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		tx, err := w.db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		stmt := tx.StmtContext(ctx, w.insert)
		now := time.Now().UnixMicro()
		for a := range aggregates {
			id := fmt.Sprintf("all%d-%d", i, a)
			for k := range perSave {
				if _, err := stmt.ExecContext(ctx, id, uuid.NewString(), []byte(benchData), 1, k+1, now); err != nil {
					b.Fatal(err)
				}
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for a := range aggregates {
			if err := w.save(ctx, fmt.Sprintf("sep%d-%d", i, a), perSave); err != nil {
				b.Fatal(err)
			}
		}
		allTime += t1.Sub(t0)
		sepTime += time.Since(t1)
		i++
	}
	events := float64(b.N * aggregates * perSave)
	b.ReportMetric(events/allTime.Seconds(), "one-tx-events/s")
	b.ReportMetric(events/sepTime.Seconds(), "separate-events/s")
	b.ReportMetric(sepTime.Seconds()/allTime.Seconds(), "gain-x")
}

// BenchmarkListProjections lists a page of 100 instances sorted by
// reference (from the start and after skipping half), and counts them,
// in projections of 10k and 100k instances whose references mix numbers,
// texts and none.
func BenchmarkListProjections(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s := openTemp(b)
			if err := s.CreateDefinition(ctx, storage.DefinitionRecord{Name: "p", Spec: json.RawMessage(`{}`)}); err != nil {
				b.Fatal(err)
			}
			now := time.Now().UTC().Truncate(time.Microsecond)
			const chunk = 10_000
			for from := 0; from < n; from += chunk {
				c := storage.ProjectionCommit{Name: "p", From: int64(from), To: int64(from + chunk)}
				for i := from; i < from+chunk; i++ {
					var ref storage.Reference
					switch i % 3 {
					case 0:
						v := float64((i * 7919) % n)
						ref = storage.Reference{Kind: storage.RefNumber, Number: v, Text: strconv.FormatFloat(v, 'f', -1, 64)}
					case 1:
						ref = storage.Reference{Kind: storage.RefText, Text: fmt.Sprintf("name-%08d", (i*104729)%n)}
					}
					c.States = append(c.States, storage.ProjectionState{
						InstanceID: fmt.Sprintf("%08d", i), Data: json.RawMessage(`{"total":"12.50","count":3}`),
						Position: int64(i + 1), CreatedAt: now, UpdatedAt: now.Add(time.Duration(i) * time.Microsecond), Reference: ref,
					})
				}
				if err := s.CommitProjection(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
			for _, c := range []struct {
				name string
				q    storage.ProjectionQuery
				want int
			}{
				{"first100", storage.ProjectionQuery{Name: "p", Sort: storage.SortByReference, Limit: 100}, 100},
				{"first100desc", storage.ProjectionQuery{Name: "p", Sort: storage.SortByReference, Descending: true, Limit: 100}, 100},
				{"numbers100", storage.ProjectionQuery{Name: "p", Sort: storage.SortByReference, Limit: 100,
					From: storage.Reference{Kind: storage.RefNumber, Number: float64(n / 2)}}, 100},
				{"count", storage.ProjectionQuery{Name: "p"}, 0},
			} {
				b.Run(c.name, func(b *testing.B) {
					for b.Loop() {
						l, err := s.ListProjections(ctx, c.q)
						if err != nil || len(l.States) != c.want || l.Total == 0 {
							b.Fatalf("list: %d states of %d, %v", len(l.States), l.Total, err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/list")
				})
			}
		})
	}
}
