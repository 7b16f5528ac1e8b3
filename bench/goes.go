package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/modernice/goes/codec"
	"github.com/modernice/goes/event"
	"github.com/modernice/goes/event/eventstore"
	"github.com/modernice/goes/event/query"
	"github.com/modernice/goes/event/query/version"
	"github.com/modernice/goes/helper/streams"
)

// goes drives github.com/modernice/goes at the level of its event.Store
// (Insert of events whose data is the encoded JSON, Query), so that it does
// the same work as the others. Its versions count events and its
// optimistic concurrency is the unique index on (aggregate, version). It
// has no global position: the feed is a query of every event sorted by
// time, and the rebuild folds that query into a map in memory.
type goes struct {
	store   event.Store
	cleanup func() error
}

// goesCodec encodes event data as the raw JSON it is.
func goesCodec() *codec.Registry {
	r := codec.New()
	codec.Register[json.RawMessage](r, eventType)
	return r
}

func newGoesMemory() *goes { return &goes{store: eventstore.New()} }

func (g *goes) append(ctx context.Context, agg string, expected int64, n int) (int64, error) {
	id, err := uuid.Parse(agg)
	if err != nil {
		return 0, err
	}
	events := make([]event.Event, n)
	now := time.Now()
	for i := range events {
		events[i] = event.New[any](eventType, json.RawMessage(eventData),
			event.Time(now), event.Aggregate(id, aggType, int(expected)+i+1))
	}
	if err := g.store.Insert(ctx, events...); err != nil {
		if isUniqueViolation(err) || strings.Contains(err.Error(), "version already exists") {
			return 0, fmt.Errorf("%w: %v", errConflict, err)
		}
		return 0, err
	}
	return expected + int64(n), nil
}

// walk calls f for every event q finds.
func (g *goes) walk(ctx context.Context, q event.Query, f func(event.Event) error) (int, error) {
	events, errs, err := g.store.Query(ctx, q)
	if err != nil {
		return 0, err
	}
	n := 0
	err = streams.Walk(ctx, func(e event.Event) error { n++; return f(e) }, events, errs)
	return n, err
}

func (g *goes) refresh(ctx context.Context, agg string, known int64) (int64, error) {
	id, err := uuid.Parse(agg)
	if err != nil {
		return 0, err
	}
	v := known
	_, err = g.walk(ctx, query.New(query.Aggregate(aggType, id),
		query.AggregateVersion(version.Min(int(known)+1)), query.SortByAggregate()),
		func(e event.Event) error {
			_, _, ev := e.Aggregate()
			v = max(v, int64(ev))
			return nil
		})
	return v, err
}

func (g *goes) load(ctx context.Context, agg string) (int, error) {
	id, err := uuid.Parse(agg)
	if err != nil {
		return 0, err
	}
	return g.walk(ctx, query.New(query.Aggregate(aggType, id), query.SortByAggregate()),
		func(event.Event) error { return nil })
}

func allByTime() event.Query {
	return query.New(query.AggregateName(aggType), query.SortBy(event.SortTime, event.SortAsc))
}

func (g *goes) feed(ctx context.Context) (int, error) {
	return g.walk(ctx, allByTime(), func(event.Event) error { return nil })
}

func (g *goes) rebuild(ctx context.Context) (int, error) {
	states := make(map[string]mapState)
	return g.walk(ctx, allByTime(), func(e event.Event) error {
		data, ok := e.Data().(json.RawMessage)
		if !ok {
			return errors.New("goes: event data is not json.RawMessage")
		}
		id, _, _ := e.Aggregate()
		return fold(states, id.String(), data)
	})
}

func (g *goes) close() error {
	if g.cleanup != nil {
		return g.cleanup()
	}
	return nil
}
