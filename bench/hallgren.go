package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hallgren/eventsourcing/core"
	hmemory "github.com/hallgren/eventsourcing/eventstore/memory"
)

// hallgren drives github.com/hallgren/eventsourcing at the level of its
// core.EventStore (Save of []core.Event with the data already encoded, Get
// from a version on), so that it does the same work as the others: bytes
// in, bytes out. Its versions count events. The feed and the rebuild use
// the store's All fetcher, which is what its projections read; the rebuild
// folds into a map in memory (its projections keep no state of their own).
type hallgren struct {
	store core.EventStore
	// all returns a fetcher of the global feed from position 1.
	all     func() core.Fetcher
	cleanup func() error
}

func newHallgrenMemory() *hallgren {
	m := hmemory.Create()
	return &hallgren{store: m, all: func() core.Fetcher { return m.All(1, feedPage) }}
}

func (h *hallgren) append(_ context.Context, agg string, expected int64, n int) (int64, error) {
	events := make([]core.Event, n)
	now := time.Now().UTC()
	for i := range events {
		events[i] = core.Event{
			AggregateID: agg, AggregateType: aggType, Reason: eventType,
			Version: core.Version(expected) + core.Version(i) + 1, Timestamp: now, Data: eventData,
		}
	}
	if err := h.store.Save(events); err != nil {
		if errors.Is(err, core.ErrConcurrency) || isUniqueViolation(err) {
			return 0, fmt.Errorf("%w: %v", errConflict, err)
		}
		return 0, err
	}
	return expected + int64(n), nil
}

func (h *hallgren) refresh(ctx context.Context, agg string, known int64) (int64, error) {
	it, err := h.store.Get(ctx, agg, aggType, core.Version(known))
	if err != nil {
		return 0, err
	}
	defer it.Close()
	v := known
	for it.Next() {
		e, err := it.Value()
		if err != nil {
			return 0, err
		}
		v = int64(e.Version)
	}
	return v, nil
}

func (h *hallgren) load(ctx context.Context, agg string) (int, error) {
	it, err := h.store.Get(ctx, agg, aggType, 0)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for it.Next() {
		if _, err := it.Value(); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// each calls f for every event of the feed.
func (h *hallgren) each(f func(core.Event) error) (int, error) {
	fetch := h.all()
	total := 0
	for {
		it, err := fetch()
		if err != nil {
			return total, err
		}
		n := 0
		for it.Next() {
			e, err := it.Value()
			if err == nil {
				err = f(e)
			}
			if err != nil {
				it.Close()
				return total, err
			}
			n++
		}
		it.Close()
		total += n
		if n == 0 {
			return total, nil
		}
	}
}

func (h *hallgren) feed(context.Context) (int, error) {
	return h.each(func(core.Event) error { return nil })
}

func (h *hallgren) rebuild(context.Context) (int, error) {
	states := make(map[string]mapState)
	return h.each(func(e core.Event) error { return fold(states, e.AggregateID, e.Data) })
}

func (h *hallgren) close() error {
	if h.cleanup != nil {
		return h.cleanup()
	}
	return nil
}

// isUniqueViolation reports a unique-constraint error of PostgreSQL or
// SQLite, which the peers return when a concurrent writer took the version.
func isUniqueViolation(err error) bool {
	s := err.Error()
	return strings.Contains(s, "23505") || strings.Contains(s, "duplicate key") ||
		strings.Contains(s, "UNIQUE constraint failed")
}
