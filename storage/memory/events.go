package memory

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/google/uuid"
)

// Append implements eventstore.Storage.
func (s *Storage) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	var small [8]uuid.UUID
	ids := small[:0]
	for _, e := range req.Events {
		id, err := uuid.Parse(e.ID)
		if err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("event id %q: %w", e.ID, eventstore.ErrInvalid)
		}
		ids = append(ids, id)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return eventstore.AppendResult{}, err
	}
	key := aggKey{req.AggregateType, req.AggregateID}
	ai, ok := s.aggs[key]
	var agg *aggregate
	var current int64
	var stored []eventstore.Event
	if ok {
		agg = s.aggList[ai]
		current = agg.events[len(agg.events)-1].version
		for _, id := range ids {
			if i, ok := agg.ids[id]; ok {
				r := agg.events[i]
				stored = append(stored, eventstore.Event{Version: r.version, Position: r.position})
			}
		}
	}
	if res, done, err := eventstore.PlanAppend(req, current, stored); done || err != nil {
		return res, err
	}
	if agg == nil {
		f := s.byType[req.AggregateType]
		if f == nil {
			f = &feed{}
			s.byType[req.AggregateType] = f
		}
		agg = &aggregate{typ: req.AggregateType, id: req.AggregateID, feed: f, ids: make(map[uuid.UUID]int32, len(req.Events))}
		ai = int32(len(s.aggList))
		s.aggList = append(s.aggList, agg)
		s.aggs[key] = ai
	}
	version := current + 1
	positions := agg.feed.positions
	for i, e := range req.Events {
		r := record{
			id:       ids[i],
			typ:      s.intern(e.Type),
			text:     s.arena.add(e.ID, e.Data),
			hasData:  e.Data != nil,
			version:  version,
			position: int64(len(s.log)) + 1,
			recorded: e.RecordedAt.UnixMicro(),
		}
		agg.ids[r.id] = int32(len(agg.events))
		s.log = append(s.log, ref{ai, int32(len(agg.events))})
		agg.events = append(agg.events, r)
		positions = append(positions, r.position)
	}
	agg.feed.positions = positions
	return eventstore.AppendResult{Version: version, Position: int64(len(s.log))}, nil
}

func (s *Storage) intern(typ string) uint32 {
	if i, ok := s.typeIdx[typ]; ok {
		return i
	}
	i := uint32(len(s.types))
	s.types = append(s.types, typ)
	s.typeIdx[typ] = i
	return i
}

// Load implements eventstore.Storage.
func (s *Storage) Load(ctx context.Context, q eventstore.LoadQuery) (eventstore.Aggregate, error) {
	aggregateType, aggregateID := q.AggregateType, q.AggregateID // TODO(contract): honour q.AfterVersion and q.Limit
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return eventstore.Aggregate{}, err
	}
	ai, ok := s.aggs[aggKey{aggregateType, aggregateID}]
	if !ok {
		return eventstore.Aggregate{}, fmt.Errorf("aggregate %s/%s: %w", aggregateType, aggregateID, eventstore.ErrNotFound)
	}
	agg := s.aggList[ai]
	refs := make([]ref, len(agg.events))
	for i := range refs {
		refs[i] = ref{ai, int32(i)}
	}
	return eventstore.Aggregate{
		Type:    aggregateType,
		ID:      aggregateID,
		Version: agg.events[len(agg.events)-1].version,
		Events:  s.build(refs),
	}, nil
}

// ReadFeed implements eventstore.Storage. Positions are assigned under the
// write lock, so every position up to the last one is always visible.
func (s *Storage) ReadFeed(ctx context.Context, q eventstore.FeedQuery) (eventstore.FeedPage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return eventstore.FeedPage{}, err
	}
	limit := max(q.Limit, 1)
	head := int64(len(s.log))
	after := max(q.After, 0)
	page := eventstore.FeedPage{Head: max(after, head)}
	var positions []int64 // nil: the whole feed
	var n int
	if q.AggregateType == "" {
		end := min(head, after+int64(limit))
		n = int(max(end-after, 0))
		if n > 0 {
			page.Head = end
		}
	} else {
		var all []int64
		if f := s.byType[q.AggregateType]; f != nil {
			all = f.positions
		}
		i := sort.Search(len(all), func(i int) bool { return all[i] > after })
		j := min(len(all), i+limit)
		positions = all[i:j]
		n = len(positions)
		if j < len(all) {
			page.Head = positions[n-1]
		}
	}
	if n == 0 {
		return page, nil
	}
	if positions == nil {
		page.Events = s.build(s.log[after : after+int64(n)])
		return page, nil
	}
	refs := make([]ref, n)
	for k, p := range positions {
		refs[k] = s.log[p-1]
	}
	page.Events = s.build(refs)
	return page, nil
}

// build turns the records at refs into events that the caller owns, with
// one allocation each for the events, their ids and their data.
func (s *Storage) build(refs []ref) []eventstore.Event {
	dataLen := 0
	for _, r := range refs {
		dataLen += int(s.aggList[r.agg].events[r.idx].text.n) - 36
	}
	data := make([]byte, 0, dataLen)
	var idText strings.Builder // String does not copy
	idText.Grow(36 * len(refs))
	events := make([]eventstore.Event, len(refs))
	for k, r := range refs {
		a := s.aggList[r.agg]
		rec := &a.events[r.idx]
		text := s.arena.get(rec.text)
		idText.Write(text[:36])
		e := &events[k]
		e.Type = s.types[rec.typ]
		e.AggregateType, e.AggregateID = a.typ, a.id
		e.Version, e.Sequence, e.Position = rec.version, int64(r.idx)+1, rec.position
		e.RecordedAt = time.UnixMicro(rec.recorded).UTC()
		if rec.hasData {
			start := len(data)
			data = append(data, text[36:]...)
			e.Data = data[start:len(data):len(data)]
		}
	}
	ids := idText.String()
	for k := range events {
		events[k].ID = ids[36*k : 36*k+36]
	}
	return events
}
