package memory

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/google/uuid"
)

// parseIDs parses the event ids of req into buf.
func parseIDs(buf []uuid.UUID, req *eventstore.AppendRequest) ([]uuid.UUID, error) {
	for _, e := range req.Events {
		id, err := uuid.Parse(e.ID)
		if err != nil {
			return nil, fmt.Errorf("event id %q: %w", e.ID, eventstore.ErrInvalid)
		}
		if len(e.EncryptedData) > eventstore.MaxEncryptedData {
			return nil, fmt.Errorf("event %s: %d bytes of encrypted data, more than %d: %w", e.ID, len(e.EncryptedData), eventstore.MaxEncryptedData, eventstore.ErrInvalid)
		}
		buf = append(buf, id)
	}
	return buf, nil
}

// Append implements eventstore.Storage.
func (s *Storage) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	var small [8]uuid.UUID
	ids, err := parseIDs(small[:0], &req)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return eventstore.AppendResult{}, err
	}
	ai, current, res, done, err := s.plan(&req, ids)
	if done || err != nil {
		return res, err
	}
	return s.write(&req, ids, ai, current), nil
}

// AppendAll implements eventstore.Storage. Every request is checked before
// the first is written, under one lock. Two requests for one aggregate are
// refused with a *BatchError wrapping ErrInvalid.
func (s *Storage) AppendAll(ctx context.Context, reqs []eventstore.AppendRequest) ([]eventstore.AppendResult, error) {
	ids := make([][]uuid.UUID, len(reqs))
	seen := make(map[aggKey]int, len(reqs))
	for i := range reqs {
		req := &reqs[i]
		var err error
		if ids[i], err = parseIDs(make([]uuid.UUID, 0, len(req.Events)), req); err != nil {
			return nil, batchError(i, req, err)
		}
		k := aggKey{req.AggregateType, req.AggregateID}
		if j, ok := seen[k]; ok {
			return nil, batchError(i, req, fmt.Errorf("the aggregate of batch %d again: %w", j, eventstore.ErrInvalid))
		}
		seen[k] = i
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	type planned struct {
		ai      int32
		current int64
	}
	plans := make([]planned, len(reqs))
	results := make([]eventstore.AppendResult, len(reqs))
	for i := range reqs {
		ai, current, res, done, err := s.plan(&reqs[i], ids[i])
		if err != nil {
			return nil, batchError(i, &reqs[i], err)
		}
		if done {
			results[i] = res
			ai = -2 // written already
		}
		plans[i] = planned{ai, current}
	}
	for i, p := range plans {
		if p.ai != -2 {
			results[i] = s.write(&reqs[i], ids[i], p.ai, p.current)
		}
	}
	return results, nil
}

func batchError(i int, req *eventstore.AppendRequest, err error) error {
	return &eventstore.BatchError{Index: i, AggregateType: req.AggregateType, AggregateID: req.AggregateID, Err: err}
}

// plan applies eventstore.PlanAppend to req, whose event ids are ids. It
// returns the aggregate's index (-1 when it has no events) and current
// version, and whether the request is settled (a duplicate) or refused.
// s.mu is held.
func (s *Storage) plan(req *eventstore.AppendRequest, ids []uuid.UUID) (ai int32, current int64, res eventstore.AppendResult, done bool, err error) {
	ai, ok := s.aggs[aggKey{req.AggregateType, req.AggregateID}]
	var stored []eventstore.Event
	if !ok {
		ai = -1
	} else {
		agg := s.aggList[ai]
		current = agg.events[len(agg.events)-1].version
		for _, id := range ids {
			if i, ok := agg.ids[id]; ok {
				r := agg.events[i]
				stored = append(stored, eventstore.Event{Version: r.version, Position: r.position})
			}
		}
	}
	res, done, err = eventstore.PlanAppend(*req, current, stored)
	return ai, current, res, done, err
}

// write stores the batch req, planned by plan, and returns its result. s.mu
// is held.
func (s *Storage) write(req *eventstore.AppendRequest, ids []uuid.UUID, ai int32, current int64) eventstore.AppendResult {
	var agg *aggregate
	if ai >= 0 {
		agg = s.aggList[ai]
	} else {
		f := s.byType[req.AggregateType]
		if f == nil {
			f = &feed{}
			s.byType[req.AggregateType] = f
		}
		f.aggCount++
		agg = &aggregate{typ: req.AggregateType, id: req.AggregateID, feed: f, ids: make(map[uuid.UUID]int32, len(req.Events))}
		ai = int32(len(s.aggList))
		s.aggList = append(s.aggList, agg)
		s.aggs[aggKey{req.AggregateType, req.AggregateID}] = ai
	}
	f := agg.feed
	f.seq++
	f.batches++
	agg.seqs = append(agg.seqs, f.seq)
	version := current + 1
	positions := f.positions
	for i, e := range req.Events {
		r := record{
			id:       ids[i],
			typ:      s.intern(e.Type),
			text:     s.arena.add(e.ID, e.Data, e.EncryptedData),
			encLen:   uint16(len(e.EncryptedData)),
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
	f.positions = positions
	return eventstore.AppendResult{Version: version, Position: int64(len(s.log))}
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

// Load implements eventstore.Storage. The range is found by binary search
// on the aggregate's versions.
func (s *Storage) Load(ctx context.Context, q eventstore.LoadQuery) (eventstore.Aggregate, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return eventstore.Aggregate{}, err
	}
	ai, ok := s.aggs[aggKey{q.AggregateType, q.AggregateID}]
	if !ok {
		return eventstore.Aggregate{}, fmt.Errorf("aggregate %s/%s: %w", q.AggregateType, q.AggregateID, eventstore.ErrNotFound)
	}
	agg := s.aggList[ai]
	events := agg.events
	lo, hi := 0, len(events)
	if q.AfterVersion > 0 {
		lo = sort.Search(len(events), func(i int) bool { return events[i].version > q.AfterVersion })
	}
	if q.Limit > 0 {
		last := int64(math.MaxInt64)
		if q.AfterVersion < math.MaxInt64-q.Limit {
			last = max(q.AfterVersion, 0) + q.Limit
		}
		hi = lo + sort.Search(len(events)-lo, func(i int) bool { return events[lo+i].version > last })
	}
	refs := make([]ref, hi-lo)
	for i := range refs {
		refs[i] = ref{ai, int32(lo + i)}
	}
	return eventstore.Aggregate{
		Type:    q.AggregateType,
		ID:      q.AggregateID,
		Version: events[len(events)-1].version,
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
	var refs []ref
	switch {
	case q.AggregateType == "" && s.deleted == 0:
		end := min(head, after+int64(limit))
		if end <= after {
			return page, nil
		}
		page.Head = end
		refs = s.log[after:end]
	case q.AggregateType == "":
		for p := after; p < head; p++ {
			if r := s.log[p]; r.agg >= 0 {
				if len(refs) == limit {
					page.Head = p // the last position returned
					break
				}
				refs = append(refs, r)
			}
		}
	default:
		var all []int64
		if f := s.byType[q.AggregateType]; f != nil {
			all = f.positions
		}
		i := sort.Search(len(all), func(i int) bool { return all[i] > after })
		if q.AfterFeedSequence > 0 {
			i = max(i, sort.Search(len(all), func(i int) bool { return s.feedSeq(all[i]) > q.AfterFeedSequence }))
		}
		j := min(len(all), i+limit)
		if j < len(all) {
			page.Head = all[j-1]
		}
		refs = make([]ref, j-i)
		for k, p := range all[i:j] {
			refs[k] = s.log[p-1]
		}
	}
	if len(refs) > 0 {
		page.Events = s.build(refs)
	}
	return page, nil
}

// feedSeq returns the FeedSequence of the live event at position p.
func (s *Storage) feedSeq(p int64) int64 {
	r := s.log[p-1]
	a := s.aggList[r.agg]
	return a.seqs[a.events[r.idx].version-1]
}

// build turns the records at refs into events that the caller owns, with
// one allocation each for the events, their ids, their data and their
// encrypted data.
func (s *Storage) build(refs []ref) []eventstore.Event {
	dataLen, encLen := 0, 0
	for _, r := range refs {
		rec := &s.aggList[r.agg].events[r.idx]
		dataLen += int(rec.text.n) - 36 - int(rec.encLen)
		encLen += int(rec.encLen)
	}
	data := make([]byte, 0, dataLen)
	var idText, encText strings.Builder // String does not copy
	idText.Grow(36 * len(refs))
	encText.Grow(encLen)
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
		e.FeedSequence = a.seqs[rec.version-1]
		e.RecordedAt = time.UnixMicro(rec.recorded).UTC()
		end := len(text) - int(rec.encLen)
		if rec.hasData {
			start := len(data)
			data = append(data, text[36:end]...)
			e.Data = data[start:len(data):len(data)]
		}
		if rec.encLen > 0 {
			encText.Write(text[end:])
		}
	}
	ids := idText.String()
	for k := range events {
		events[k].ID = ids[36*k : 36*k+36]
	}
	if encLen > 0 {
		enc, off := encText.String(), 0
		for k, r := range refs {
			if n := int(s.aggList[r.agg].events[r.idx].encLen); n > 0 {
				events[k].EncryptedData = enc[off : off+n]
				off += n
			}
		}
	}
	return events
}
