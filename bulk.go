package eventstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/storage"
	"go.opentelemetry.io/otel/trace"
)

// Batch is one aggregate's events in a Store.SaveAll.
type Batch struct {
	AggregateID     string // unique within a SaveAll
	Events          []NewEvent
	ExpectedVersion VersionCheck // when set, the version the aggregate must be at
}

// SaveAll saves batches, each to a different aggregate of aggregateType,
// atomically: all or none. Each follows Save's rules; res[i] is
// batches[i]'s. A refused batch is named by a *BatchError, a bad field as
// "batches[2].events[0].eventId".
func (s *Store) SaveAll(ctx context.Context, aggregateType string, batches []Batch) (res []SaveResult, err error) {
	var span tracing.Span
	if s.tracer.Enabled() { // inlined: no call while nothing traces
		ctx, span = s.tracer.Start(ctx, spanSaveAll, trace.SpanKindInternal)
		defer func() { endSaveAll(span, aggregateType, batches, err) }()
	}
	reqs, err := s.prepareAll(aggregateType, batches)
	if err != nil {
		return nil, err
	}
	return s.appendAll(ctx, "save "+aggregateType, reqs, span.Started())
}

// appendAll appends the requests of a SaveAll or SaveImported, op naming
// it in errors; traced stamps the events with the span.
func (s *Store) appendAll(ctx context.Context, op string, reqs []storage.AppendRequest, traced bool) ([]SaveResult, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("%s: %w", op, ErrClosed)
	}
	if traced {
		for i := range reqs {
			stampTrace(ctx, reqs[i].Events)
		}
	}
	rs, err := s.storage.AppendAll(ctx, reqs)
	s.noteWrite(err)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if len(rs) != len(reqs) {
		return nil, fmt.Errorf("%s: storage returned %d results for %d batches", op, len(rs), len(reqs))
	}
	res := make([]SaveResult, len(rs))
	var last int64
	for i, r := range rs {
		res[i] = SaveResult(r)
		last = max(last, r.Position)
	}
	s.observe(last)
	return res, nil
}

// prepareAll validates every batch of a SaveAll and builds the storage
// requests.
func (s *Store) prepareAll(aggregateType string, batches []Batch) ([]storage.AppendRequest, error) {
	v := validation{op: "save"}
	checkFeedName(&v, "aggregateType", aggregateType)
	return s.prepareBatches(&v, batches, func(int) (string, time.Time) { return aggregateType, time.Time{} }, true, false)
}

// prepareBatches validates batches and builds their storage requests,
// batches[i] of the aggregate type and recorded time of of(i) (zero for
// now). With oneType, every batch is of one type, checked by the caller
// (its problems are reported once, not per batch). With repeats, several
// batches may be of one aggregate (SaveImported); otherwise a repeated
// aggregate is refused.
func (s *Store) prepareBatches(v *validation, batches []Batch, of func(i int) (string, time.Time), oneType, repeats bool) ([]storage.AppendRequest, error) {
	total := 0
	for _, b := range batches {
		total += len(b.Events)
	}
	switch {
	case len(batches) == 0:
		v.add("batches", "at least one batch is required")
	case len(batches) > limits.MaxSaveAllBatches:
		v.add("batches", "at most %d batches are allowed, got %d", limits.MaxSaveAllBatches, len(batches))
	case total > limits.MaxSaveAllEvents:
		v.add("batches", "at most %d events are allowed across the batches, got %d", limits.MaxSaveAllEvents, total)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	reqs := make([]storage.AppendRequest, len(batches))
	type key struct{ typ, id string }
	first := make(map[key]int, len(batches))
	events := make([]Event, total) // of every request, each capped to its own
	for i, b := range batches {
		prefix := func() string { return fmt.Sprintf("batches[%d].", i) } // only on errors
		typ, at := of(i)
		if j, ok := first[key{typ, b.AggregateID}]; ok && b.AggregateID != "" && !repeats {
			v.add(prefix()+"aggregateId", "repeats the aggregate of batches[%d]", j)
		} else {
			first[key{typ, b.AggregateID}] = i
		}
		req, err := s.prepare(typ, b.AggregateID, b.Events, &SaveOptions{ExpectedVersion: b.ExpectedVersion}, events, at)
		events = events[min(len(b.Events), len(events)):]
		if ve, ok := err.(*ValidationError); ok {
			for _, f := range ve.Fields {
				if f.Field == "aggregateType" && oneType {
					continue // reported once by the caller
				}
				if f.Field != "" && !strings.HasPrefix(f.Field, "[") {
					f.Field = prefix() + f.Field
				}
				v.fields = append(v.fields, f)
			}
		} else if err != nil {
			return nil, err
		}
		reqs[i] = req
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return reqs, nil
}
