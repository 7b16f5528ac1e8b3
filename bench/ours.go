package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
)

// ours drives this library through its public API: eventstore.Store for
// saves, loads and the feed, a Projector for the rebuild.
type ours struct {
	store   *eventstore.Store
	proj    *eventstore.Projector
	n       atomic.Int64 // projections created, for fresh names
	cleanup func() error // run after the store is closed, may be nil
}

// feedPage is how many events one read of the feed asks for, by every
// subject that reads in pages.
const feedPage = 1000

func newOurs(s storage.Storage, cleanup func() error) (*ours, error) {
	st, err := eventstore.New(s, nil)
	if err != nil {
		return nil, err
	}
	return &ours{store: st, proj: eventstore.NewProjector(st, nil), cleanup: cleanup}, nil
}

func (o *ours) append(ctx context.Context, agg string, expected int64, n int) (int64, error) {
	events := make([]eventstore.NewEvent, n)
	for i := range events {
		events[i] = eventstore.NewEvent{ID: uuid.NewString(), Type: eventType, Data: eventData}
	}
	res, err := o.store.Save(ctx, aggType, agg, events,
		&eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(expected)})
	if errors.Is(err, eventstore.ErrConflict) {
		return 0, fmt.Errorf("%w: %v", errConflict, err)
	}
	return res.Version, err
}

// refresh reads the events after the version the writer knows, as the
// other subjects do.
func (o *ours) refresh(ctx context.Context, agg string, known int64) (int64, error) {
	a, _, err := o.store.LoadRange(ctx, aggType, agg, known, 0)
	return a.Version, err
}

func (o *ours) load(ctx context.Context, agg string) (int, error) {
	a, err := o.store.Load(ctx, aggType, agg)
	return len(a.Events), err
}

func (o *ours) feed(ctx context.Context) (int, error) {
	var after int64
	total := 0
	for {
		r, err := o.store.ReadFeed(ctx, "", after, &eventstore.FeedOptions{Limit: feedPage})
		if err != nil {
			return total, err
		}
		for _, e := range r.Entries {
			total += len(e.Events)
		}
		if len(r.Entries) == 0 {
			return total, nil
		}
		after = r.Next
	}
}

// rebuild creates a new definition, which the Projector builds from the
// whole feed, and waits until it is current. It returns the checkpoint,
// which is the number of events when positions are contiguous.
func (o *ours) rebuild(ctx context.Context) (int, error) {
	name := fmt.Sprintf("totals%d", o.n.Add(1))
	def := eventstore.Definition{Name: name, Feed: aggType, Handlers: []eventstore.Handler{{
		EventType: eventType,
		Functions: []eventstore.Function{
			{Name: eventstore.FuncAdd, TargetSelector: "$.projection.total", EventSelector: "$.event.amount"},
			{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"},
		},
	}}}
	if err := o.proj.Create(ctx, def); err != nil {
		return 0, err
	}
	if err := o.proj.CatchUp(ctx, name); err != nil {
		return 0, err
	}
	st, err := o.proj.Status(ctx, name)
	if err != nil {
		return 0, err
	}
	if len(st.Errors) > 0 {
		return 0, fmt.Errorf("projection errors: %v", st.Errors[0].Message)
	}
	return int(st.Checkpoint), nil
}

func (o *ours) close() error {
	err := o.store.Close()
	if o.cleanup != nil {
		err = errors.Join(err, o.cleanup())
	}
	return err
}
