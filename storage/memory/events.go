package memory

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore"
)

// Append implements eventstore.Storage. Ids are hashed before the lock is
// taken; under it, the aggregate is found once, each id is
// looked up in the aggregate's index, and nothing already stored moves.
func (s *Storage) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	var small [8]eventID
	ids, err := eventIDs(small[:0], s.seed, &req)
	if err != nil {
		return eventstore.AppendResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return eventstore.AppendResult{}, err
	}
	agg, res, done, err := s.plan(&req, ids)
	if done || err != nil {
		return res, err
	}
	return s.write(&req, ids, agg), nil
}

// AppendAll implements eventstore.Storage. Every request is checked before
// the first is written, under one lock. Two requests for one aggregate are
// refused with a *BatchError wrapping ErrInvalid.
func (s *Storage) AppendAll(ctx context.Context, reqs []eventstore.AppendRequest) ([]eventstore.AppendResult, error) {
	total := 0
	for i := range reqs {
		total += len(reqs[i].Events)
	}
	all := make([]eventID, 0, total) // every request's, each capped to its own
	ids := make([][]eventID, len(reqs))
	seen := make(map[aggKey]int, len(reqs))
	for i := range reqs {
		req := &reqs[i]
		start := len(all)
		var err error
		if all, err = eventIDs(all, s.seed, req); err != nil {
			return nil, batchError(i, req, err)
		}
		ids[i] = all[start:len(all):len(all)]
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
	aggs := make([]*aggregate, len(reqs))
	results := make([]eventstore.AppendResult, len(reqs))
	written := make([]bool, len(reqs))
	for i := range reqs {
		agg, res, done, err := s.plan(&reqs[i], ids[i])
		if err != nil {
			return nil, batchError(i, &reqs[i], err)
		}
		aggs[i], results[i], written[i] = agg, res, done
	}
	for i := range reqs {
		if !written[i] {
			results[i] = s.write(&reqs[i], ids[i], aggs[i])
		}
	}
	return results, nil
}

func batchError(i int, req *eventstore.AppendRequest, err error) error {
	return &eventstore.BatchError{Index: i, AggregateType: req.AggregateType, AggregateID: req.AggregateID, Err: err}
}

// plan applies eventstore.PlanAppend to req, whose event ids are ids. It
// returns the aggregate (nil when it has no events) and whether the
// request is settled (a duplicate) or refused. s.mu is held.
func (s *Storage) plan(req *eventstore.AppendRequest, ids []eventID) (agg *aggregate, res eventstore.AppendResult, done bool, err error) {
	var current int64
	var stored []eventstore.Event
	if ai, ok := s.aggs[aggKey{req.AggregateType, req.AggregateID}]; ok {
		agg = *s.aggList.at(int(ai))
		current = int64(agg.seqs.len())
		for _, id := range ids {
			if i, ok := agg.ids.find(id.hash, func(i int32) bool { return s.hasID(agg.events.at(int(i)), id.text) }); ok {
				r := agg.events.at(int(i))
				stored = append(stored, eventstore.Event{Version: r.version, Position: r.position})
			}
		}
	}
	res, done, err = eventstore.PlanAppend(*req, current, stored)
	return agg, res, done, err
}

// write stores the batch req, planned by plan for agg (nil for a new
// aggregate), and returns its result. s.mu is held.
func (s *Storage) write(req *eventstore.AppendRequest, ids []eventID, agg *aggregate) eventstore.AppendResult {
	if agg == nil {
		f := s.byType[req.AggregateType]
		if f == nil {
			f = &feed{}
			s.byType[req.AggregateType] = f
		}
		f.aggCount++
		agg = &aggregate{typ: req.AggregateType, id: req.AggregateID, feed: f, index: int32(s.aggList.len())}
		s.aggList.push(agg)
		s.aggs[aggKey{req.AggregateType, req.AggregateID}] = agg.index
	}
	f := agg.feed
	f.seq++
	f.batches++
	agg.seqs.push(f.seq)
	version := int64(agg.seqs.len())
	for i, e := range req.Events {
		idx := int32(agg.events.len())
		position := int64(s.log.len()) + 1
		agg.events.push(record{
			typ:      s.intern(e.Type),
			text:     s.arena.add(ids[i].text, e.Data, e.EncryptedData),
			encLen:   uint16(len(e.EncryptedData)),
			hasData:  e.Data != nil,
			version:  version,
			position: position,
			recorded: e.RecordedAt.UnixMicro(),
		})
		agg.ids.add(ids[i].hash, idx)
		s.log.push(ref{agg.index, idx})
		f.positions.push(position)
	}
	return eventstore.AppendResult{Version: version, Position: int64(s.log.len())}
}

// hasID reports whether the event r has the id id.
func (s *Storage) hasID(r *record, id string) bool {
	return string(s.arena.get(r.text)[:idLen]) == id // no copy: compared in place
}

// intern returns the index of typ in s.types, adding it when it is new.
// Saves mostly repeat the type of the event before, which is checked
// before the map.
func (s *Storage) intern(typ string) uint32 {
	if s.lastType < uint32(len(s.types)) && s.types[s.lastType] == typ {
		return s.lastType
	}
	i, ok := s.typeIdx[typ]
	if !ok {
		i = uint32(len(s.types))
		s.types = append(s.types, typ)
		s.typeIdx[typ] = i
	}
	s.lastType = i
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
	agg := *s.aggList.at(int(ai))
	events := &agg.events
	lo, hi := 0, events.len()
	if q.AfterVersion > 0 {
		lo = events.search(0, func(r *record) bool { return r.version > q.AfterVersion })
	}
	if q.Limit > 0 {
		last := int64(math.MaxInt64)
		if q.AfterVersion < math.MaxInt64-q.Limit {
			last = max(q.AfterVersion, 0) + q.Limit
		}
		hi = events.search(lo, func(r *record) bool { return r.version > last })
	}
	refs := make([]ref, hi-lo)
	for i := range refs {
		refs[i] = ref{ai, int32(lo + i)}
	}
	refs = refs[:s.budget(refs, q.MaxBytes, true)]
	return eventstore.Aggregate{
		Type:    q.AggregateType,
		ID:      q.AggregateID,
		Version: int64(agg.seqs.len()),
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
	head := int64(s.log.len())
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
		refs = s.log.appendTo(make([]ref, 0, end-after), int(after), int(end))
	case q.AggregateType == "":
		for p := after; p < head; p++ {
			if r := *s.log.at(int(p)); r.agg >= 0 {
				if len(refs) == limit {
					page.Head = p // the last position returned
					break
				}
				refs = append(refs, r)
			}
		}
	default:
		var all *list[int64]
		if f := s.byType[q.AggregateType]; f != nil {
			all = &f.positions
		} else {
			all = &list[int64]{}
		}
		i := all.search(0, func(p *int64) bool { return *p > after })
		if q.AfterFeedSequence > 0 {
			i = max(i, all.search(0, func(p *int64) bool { return s.feedSeq(*p) > q.AfterFeedSequence }))
		}
		j := min(all.len(), i+limit)
		if j < all.len() {
			page.Head = *all.at(j - 1)
		}
		refs = make([]ref, j-i)
		for k := range refs {
			refs[k] = *s.log.at(int(*all.at(i + k)) - 1)
		}
	}
	if n := s.budget(refs, q.MaxBytes, false); n < len(refs) {
		refs = refs[:n]
		page.Head, page.Truncated = (*s.aggList.at(int(refs[n-1].agg))).events.at(int(refs[n-1].idx)).position, true
	}
	if len(refs) > 0 {
		page.Events = s.build(refs)
	}
	return page, nil
}

// budget returns how many of refs a read with a byte budget of max keeps
// (see eventstore.LoadQuery.MaxBytes and FeedQuery.MaxBytes): all when
// max is not positive, else up to the first event, or with byVersion the
// end of the first version, with which their data and encrypted data
// reach max.
func (s *Storage) budget(refs []ref, max int64, byVersion bool) int {
	if max <= 0 {
		return len(refs)
	}
	var total int64
	for i, r := range refs {
		rec := (*s.aggList.at(int(r.agg))).events.at(int(r.idx))
		total += int64(rec.text.n) - idLen
		if total < max {
			continue
		}
		if !byVersion || i+1 == len(refs) {
			return i + 1
		}
		if next := refs[i+1]; next.agg != r.agg || (*s.aggList.at(int(next.agg))).events.at(int(next.idx)).version != rec.version {
			return i + 1
		}
	}
	return len(refs)
}

// feedSeq returns the FeedSequence of the live event at position p.
func (s *Storage) feedSeq(p int64) int64 {
	r := s.log.at(int(p) - 1)
	a := *s.aggList.at(int(r.agg))
	return *a.seqs.at(int(a.events.at(int(r.idx)).version) - 1)
}

// build turns the records at refs into events that the caller owns, with
// one allocation each for the events, their ids, their data and their
// encrypted data.
func (s *Storage) build(refs []ref) []eventstore.Event {
	dataLen, encLen := 0, 0
	for _, r := range refs {
		rec := (*s.aggList.at(int(r.agg))).events.at(int(r.idx))
		dataLen += int(rec.text.n) - idLen - int(rec.encLen)
		encLen += int(rec.encLen)
	}
	data := make([]byte, 0, dataLen)
	var idText, encText strings.Builder // String does not copy
	idText.Grow(idLen * len(refs))
	encText.Grow(encLen)
	events := make([]eventstore.Event, len(refs))
	for k, r := range refs {
		a := *s.aggList.at(int(r.agg))
		rec := a.events.at(int(r.idx))
		text := s.arena.get(rec.text)
		idText.Write(text[:idLen])
		e := &events[k]
		e.Type = s.types[rec.typ]
		e.AggregateType, e.AggregateID = a.typ, a.id
		e.Version, e.Sequence, e.Position = rec.version, int64(r.idx)+1, rec.position
		e.FeedSequence = *a.seqs.at(int(rec.version) - 1)
		e.RecordedAt = time.UnixMicro(rec.recorded).UTC()
		end := len(text) - int(rec.encLen)
		if rec.hasData {
			start := len(data)
			data = append(data, text[idLen:end]...)
			e.Data = data[start:len(data):len(data)]
		}
		if rec.encLen > 0 {
			encText.Write(text[end:])
		}
	}
	ids := idText.String()
	for k := range events {
		events[k].ID = ids[idLen*k : idLen*k+idLen]
	}
	if encLen > 0 {
		enc, off := encText.String(), 0
		for k, r := range refs {
			if n := int((*s.aggList.at(int(r.agg))).events.at(int(r.idx)).encLen); n > 0 {
				events[k].EncryptedData = enc[off : off+n]
				off += n
			}
		}
	}
	return events
}
