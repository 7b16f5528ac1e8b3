package eventstore

import (
	"context"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/tracing"
	"go.opentelemetry.io/otel/trace"
)

// ImportedBatch is one aggregate's events for Store.SaveImported, with
// the time they were recorded elsewhere.
type ImportedBatch struct {
	AggregateType, AggregateID string
	Events                     []NewEvent
	ExpectedVersion            VersionCheck // when set, the version the aggregate must be at
	RecordedAt                 time.Time    // from 1970 to 5 minutes after the Store's clock; kept to the microsecond
}

// spanSaveImported is the span of a SaveImported.
const spanSaveImported = "eventstore.SaveImported"

// SaveImported is SaveAll for import tools (package archive): batches
// of several types, keeping their RecordedAt, positions in their order.
// Batches of one aggregate are checked in order, each against what the
// ones before it leave. A RecordedAt out of range is a *ValidationError.
func (s *Store) SaveImported(ctx context.Context, batches []ImportedBatch) (res []SaveResult, err error) {
	var span tracing.Span
	if s.tracer.Enabled() {
		ctx, span = s.tracer.Start(ctx, spanSaveImported, trace.SpanKindInternal)
		defer func() {
			if span.Recording() {
				n := 0
				for _, b := range batches {
					n += len(b.Events)
				}
				span.SetAttributes(attrBatchCount.Int(len(batches)), attrEventCount.Int(n))
				fail(span, err)
			}
			span.End()
		}()
	}
	v := validation{op: "save imported"}
	bs := make([]Batch, len(batches))
	latest := s.now().Add(limits.MaxImportSkew)
	for i, b := range batches {
		bs[i] = Batch{AggregateID: b.AggregateID, Events: b.Events, ExpectedVersion: b.ExpectedVersion}
		field := fmt.Sprintf("batches[%d].recordedAt", i)
		switch {
		case b.RecordedAt.IsZero():
			v.add(field, "is required")
		case b.RecordedAt.Before(minRecordedAt):
			v.add(field, "must not be before 1970-01-01T00:00:00Z, got %s", b.RecordedAt.UTC().Format(time.RFC3339Nano))
		case b.RecordedAt.After(latest):
			v.add(field, "must not be more than %v after the store's clock, got %s", limits.MaxImportSkew, b.RecordedAt.UTC().Format(time.RFC3339Nano))
		}
	}
	reqs, err := s.prepareBatches(&v, bs, func(i int) (string, time.Time) {
		return batches[i].AggregateType, batches[i].RecordedAt
	}, false, true)
	if err != nil {
		return nil, err
	}
	return s.appendAll(ctx, "save imported", reqs, span.Started())
}

// minRecordedAt is the earliest RecordedAt SaveImported takes.
var minRecordedAt = time.Unix(0, 0)
