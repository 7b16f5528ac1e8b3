package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/google/uuid"
)

func memoryMakers() []maker {
	return []maker{
		{"ours", func(context.Context) (subject, error) { return newOurs(memory.New(), nil) }},
		{"raw", func(context.Context) (subject, error) { return newMapStore(), nil }},
		{"hallgren", func(context.Context) (subject, error) { return newHallgrenMemory(), nil }},
		{"goes", func(context.Context) (subject, error) { return newGoesMemory(), nil }},
	}
}

// mapStore is the in-memory baseline: a map of aggregates and a global
// slice behind one mutex, doing what a save must (version check, copy of
// the data, id, type and time kept, global position assigned) and nothing
// the library adds on top (input validation, idempotency by event id).
type mapStore struct {
	mu     sync.RWMutex
	aggs   map[string][]int // indexes into all
	all    []mapEvent
	states map[string]map[string]mapState // projection name → aggregate → state
	n      int
}

type mapEvent struct {
	id, typ, agg string
	data         []byte
	version      int64
	recordedAt   time.Time
}

type mapState struct {
	Total, Count int64
}

func newMapStore() *mapStore {
	return &mapStore{aggs: make(map[string][]int), states: make(map[string]map[string]mapState)}
}

func (m *mapStore) append(_ context.Context, agg string, expected int64, n int) (int64, error) {
	events := make([]mapEvent, n)
	now := time.Now().UTC()
	for i := range events {
		events[i] = mapEvent{id: uuid.NewString(), typ: eventType, agg: agg, data: slices.Clone(eventData), recordedAt: now}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	idx := m.aggs[agg]
	var cur int64
	if len(idx) > 0 {
		cur = m.all[idx[len(idx)-1]].version
	}
	if cur != expected {
		return 0, fmt.Errorf("%w: at %d, expected %d", errConflict, cur, expected)
	}
	for i := range events {
		events[i].version = cur + 1
		idx = append(idx, len(m.all))
		m.all = append(m.all, events[i])
	}
	m.aggs[agg] = idx
	return cur + 1, nil
}

func (m *mapStore) refresh(_ context.Context, agg string, known int64) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v := known
	var missed []mapEvent // what a client would apply to its state
	for _, j := range m.aggs[agg] {
		if e := m.all[j]; e.version > known {
			missed = append(missed, e)
			v = e.version
		}
	}
	_ = missed
	return v, nil
}

func (m *mapStore) load(_ context.Context, agg string) (int, error) {
	m.mu.RLock()
	idx := m.aggs[agg]
	out := make([]mapEvent, len(idx))
	for i, j := range idx {
		out[i] = m.all[j]
	}
	m.mu.RUnlock()
	return len(out), nil
}

func (m *mapStore) feed(_ context.Context) (int, error) {
	total := 0
	for after := 0; ; {
		m.mu.RLock()
		end := min(after+feedPage, len(m.all))
		page := slices.Clone(m.all[after:end])
		m.mu.RUnlock()
		if len(page) == 0 {
			return total, nil
		}
		total += len(page)
		after = end
	}
}

// rebuild folds the feed into a map of states, decoding each event's data.
func (m *mapStore) rebuild(_ context.Context) (int, error) {
	states := make(map[string]mapState)
	total := 0
	for after := 0; ; {
		m.mu.RLock()
		end := min(after+feedPage, len(m.all))
		page := slices.Clone(m.all[after:end])
		m.mu.RUnlock()
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			if err := fold(states, e.agg, e.data); err != nil {
				return total, err
			}
		}
		total += len(page)
		after = end
	}
	m.mu.Lock()
	m.n++
	m.states[fmt.Sprint(m.n)] = states
	m.mu.Unlock()
	return total, nil
}

func (m *mapStore) close() error { return nil }

// fold applies one event's data to the state of its aggregate, as the
// projection of the rebuild workload does: total += amount, count++.
func fold(states map[string]mapState, agg string, data []byte) error {
	var d struct {
		Amount int64 `json:"amount"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	s := states[agg]
	s.Total += d.Amount
	s.Count++
	states[agg] = s
	return nil
}
