package eventstore

import (
	"context"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/tracing"
	"go.opentelemetry.io/otel/trace"
)

// ImportedBatch is one aggregate's events in a Store.SaveImported: events
// recorded elsewhere (another store, an archive), with the time they were
// recorded there.
type ImportedBatch struct {
	AggregateType, AggregateID string
	Events                     []NewEvent
	ExpectedVersion            VersionCheck // when set, the version the aggregate must be at
	// RecordedAt is when the batch was recorded: from 1970-01-01 UTC to
	// 5 minutes after the Store's clock (the clocks of the machine that
	// recorded it and of this one may differ a little, but a time further
	// ahead is a mistake that would put the events after everything saved
	// from now on in a feed read by date), kept at microsecond precision.
	RecordedAt time.Time
}

// spanSaveImported is the span of a SaveImported.
const spanSaveImported = "eventstore.SaveImported"

// SaveImported saves batches recorded elsewhere, as an import does
// (package archive): as SaveAll does, in one atomic step with SaveAll's
// rules and bounds, except that the batches may be of different aggregate
// types (each aggregate at most once) and their events keep the
// batch's RecordedAt instead of getting the time of the save. Positions
// are still given in the order of the batches, so a feed read by date
// (FeedOptions.From and To) finds imported events by their recorded time
// while their positions follow the import's order.
//
// It is for import tools: an application saving its own events uses Save
// or SaveAll, which stamp them with the Store's clock. A RecordedAt that
// is zero, before 1970 or more than 5 minutes after the Store's clock
// is a *ValidationError.
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
	}, false)
	if err != nil {
		return nil, err
	}
	return s.appendAll(ctx, "save imported", reqs, span.Started())
}

// minRecordedAt is the earliest RecordedAt SaveImported takes.
var minRecordedAt = time.Unix(0, 0)
