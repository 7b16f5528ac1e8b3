package eventstore

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/storage"
	"go.opentelemetry.io/otel/trace"
)

// LoadRange returns the aggregate with the events of its versions in
// (afterVersion, afterVersion+limit] (limit 0: all), a page ending early
// at Options.MaxReadBytes; page on from the last event's Version while
// hasMore. An aggregate without events is ErrNotFound.
func (s *Store) LoadRange(ctx context.Context, aggregateType, aggregateID string, afterVersion, limit int64) (agg Aggregate, hasMore bool, err error) {
	var span tracing.Span
	if s.tracer.Enabled() { // inlined: no call while nothing traces
		ctx, span = s.tracer.Start(ctx, spanLoad, trace.SpanKindInternal)
		defer func() { endLoad(span, aggregateType, agg, err) }()
	}
	v := validation{op: "load"}
	checkName(&v, "aggregateType", aggregateType)
	checkName(&v, "aggregateId", aggregateID)
	if afterVersion < 0 {
		v.add("since", "must not be negative, got %d", afterVersion)
	}
	if limit < 0 {
		v.add("limit", "must not be negative, got %d", limit)
	}
	if err := v.err(); err != nil {
		return Aggregate{}, false, err
	}
	if s.closed.Load() {
		return Aggregate{}, false, fmt.Errorf("load %s/%s: %w", aggregateType, aggregateID, ErrClosed)
	}
	if limit > 0 && afterVersion > math.MaxInt64-limit {
		limit = math.MaxInt64 - afterVersion
	}
	q := storage.LoadQuery{AggregateType: aggregateType, AggregateID: aggregateID, AfterVersion: afterVersion, Limit: limit}
	if limit > 0 {
		q.MaxBytes = s.readBytes
	}
	agg, err = s.storage.Load(ctx, q)
	if err != nil {
		return Aggregate{}, false, wrapNotFound(fmt.Sprintf("aggregate %s/%s", aggregateType, aggregateID), err)
	}
	last := afterVersion
	if n := len(agg.Events); n > 0 {
		last = agg.Events[n-1].Version
	}
	return agg, limit > 0 && last < agg.Version, nil
}

// Exists reports whether the aggregate has events, without loading them.
func (s *Store) Exists(ctx context.Context, aggregateType, aggregateID string) (bool, error) {
	v := validation{op: "load"}
	checkName(&v, "aggregateType", aggregateType)
	checkName(&v, "aggregateId", aggregateID)
	if err := v.err(); err != nil {
		return false, err
	}
	if s.closed.Load() {
		return false, fmt.Errorf("exists %s/%s: %w", aggregateType, aggregateID, ErrClosed)
	}
	// A range past every version: the storage answers from the
	// aggregate's version alone.
	_, err := s.storage.Load(ctx, storage.LoadQuery{AggregateType: aggregateType, AggregateID: aggregateID, AfterVersion: math.MaxInt64})
	switch {
	case err == nil:
		return true, nil
	case isNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("exists %s/%s: %w", aggregateType, aggregateID, err)
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
