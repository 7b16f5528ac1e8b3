package memory

import (
	"cmp"
	"context"
	"slices"

	"github.com/eventkit-go/eventstore/storage"
)

// Append implements storage.Storage. Ids are hashed before any lock is
// taken. A save to an aggregate that exists is planned under the
// aggregate's lock alone (see Storage): its version is checked, and its ids
// are looked up in the aggregate's index by hash. Only then is the
// Storage's lock taken, to assign positions and store the events; the id
// index is updated after it is released, under the aggregate's lock still.
// The Storage's lock is held for the whole save when the aggregate is new
// or when a stored id has the hash of one of the batch's (a retried save),
// whose ids are then compared.
func (s *store) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	var small [8]eventID
	ids, err := eventIDs(small[:0], s.seed, &req)
	if err != nil {
		return storage.AppendResult{}, err
	}
	metas, err := encodeMetadata(&req)
	if err != nil {
		return storage.AppendResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return storage.AppendResult{}, err
	}
	for {
		var res storage.AppendResult
		var retry bool
		if agg := s.lookup(req.AggregateType, req.AggregateID); agg != nil {
			res, retry, err = s.appendTo(ctx, agg, &req, ids, metas)
		} else {
			res, retry, err = s.appendNew(ctx, &req, ids, metas)
		}
		if !retry {
			return res, err
		}
	}
}

// appendNew stores req, whose aggregate was not in the directory, under
// s.mu. It reports retry, having done nothing, when the aggregate was
// created meanwhile.
func (s *store) appendNew(ctx context.Context, req *storage.AppendRequest, ids []eventID, metas [][]byte) (res storage.AppendResult, retry bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return res, false, err
	}
	if s.lookup(req.AggregateType, req.AggregateID) != nil {
		return res, true, nil
	}
	if res, done, err := s.plan(req, ids, nil); done || err != nil {
		return res, false, err
	}
	return s.write(req, ids, metas, nil, false), false, nil
}

// appendTo stores req in agg, which was found in the directory without a
// lock. It reports retry, having done nothing, when agg was deleted before
// the outcome was settled.
func (s *store) appendTo(ctx context.Context, agg *aggregate, req *storage.AppendRequest, ids []eventID, metas [][]byte) (res storage.AppendResult, retry bool, err error) {
	agg.mu.Lock()
	defer agg.mu.Unlock()
	// Under agg.mu, no other save changes agg: its version, events and
	// ids stay as read here until the end of this save.
	maybeStored := false
	for _, id := range ids {
		if agg.ids.has(id.hash) {
			maybeStored = true
			break
		}
	}
	if !maybeStored {
		// No id of the batch is stored: only the version can refuse it.
		if _, _, err := storage.PlanAppend(*req, int64(agg.seqs.len()), nil); err != nil {
			// The outcome holds if agg was live when it was planned.
			return res, agg.dead.Load(), err
		}
	}
	first := agg.events.len()
	s.mu.Lock()
	if agg.dead.Load() {
		s.mu.Unlock()
		return res, true, nil
	}
	if err := s.check(ctx); err != nil {
		s.mu.Unlock()
		return res, false, err
	}
	if maybeStored {
		if res, done, err := s.plan(req, ids, agg); done || err != nil {
			s.mu.Unlock()
			return res, false, err
		}
	}
	res = s.write(req, ids, metas, agg, false)
	s.mu.Unlock()
	index(agg, first, ids)
	return res, false, nil
}

// AppendAll implements storage.Storage. Every request is checked before
// the first is written, under the lock of every aggregate that exists and
// then the Storage's; a request for an aggregate of an earlier request is
// checked against what the earlier ones will have written (see planAfter).
func (s *store) AppendAll(ctx context.Context, reqs []storage.AppendRequest) ([]storage.AppendResult, error) {
	total := 0
	for i := range reqs {
		total += len(reqs[i].Events)
	}
	all := make([]eventID, 0, total) // every request's, each capped to its own
	ids := make([][]eventID, len(reqs))
	metas := make([][][]byte, len(reqs))
	seen := make(map[aggKey]int, len(reqs))
	repeats := false
	for i := range reqs {
		req := &reqs[i]
		start := len(all)
		var err error
		if all, err = eventIDs(all, s.seed, req); err != nil {
			return nil, batchError(i, req, err)
		}
		ids[i] = all[start:len(all):len(all)]
		if metas[i], err = encodeMetadata(req); err != nil {
			return nil, batchError(i, req, err)
		}
		k := aggKey{req.AggregateType, req.AggregateID}
		if _, ok := seen[k]; ok {
			repeats = true
		}
		seen[k] = i
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for {
		results, retry, err := s.appendAll(ctx, reqs, ids, metas, repeats)
		if !retry {
			return results, err
		}
	}
}

// appendAll is one attempt of AppendAll; repeats says whether a request
// is for the aggregate of an earlier one. It reports retry, having done
// nothing, when an aggregate was created or deleted between its lookup and
// the locks.
func (s *store) appendAll(ctx context.Context, reqs []storage.AppendRequest, ids [][]eventID, metas [][][]byte, repeats bool) ([]storage.AppendResult, bool, error) {
	aggs := make([]*aggregate, len(reqs))
	var held []*aggregate
	for i := range reqs {
		if a := s.lookup(reqs[i].AggregateType, reqs[i].AggregateID); a != nil {
			aggs[i] = a
			held = append(held, a)
		}
	}
	// The lock order of Storage: aggregates by ascending index, then s.mu.
	slices.SortFunc(held, func(a, b *aggregate) int { return cmp.Compare(a.index, b.index) })
	held = slices.Compact(held) // an aggregate of several requests is locked once
	for _, a := range held {
		a.mu.Lock()
	}
	defer func() {
		for _, a := range held {
			a.mu.Unlock()
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, false, err
	}
	for i := range reqs {
		// dir changes only under s.mu: what it holds now stays.
		if s.lookup(reqs[i].AggregateType, reqs[i].AggregateID) != aggs[i] {
			return nil, true, nil
		}
	}
	results := make([]storage.AppendResult, len(reqs))
	written := make([]bool, len(reqs))
	var calls map[aggKey]*callAgg // with repeats: each aggregate as the requests before leave it
	if repeats {
		calls = make(map[aggKey]*callAgg, len(reqs))
	}
	position := int64(s.log.len()) // the last, after the requests planned so far
	for i := range reqs {
		req := &reqs[i]
		var res storage.AppendResult
		var done bool
		var err error
		if repeats {
			k := aggKey{req.AggregateType, req.AggregateID}
			c := calls[k]
			if c == nil {
				c = &callAgg{}
				if aggs[i] != nil {
					c.version = int64(aggs[i].seqs.len())
				}
				calls[k] = c
			}
			res, done, err = s.planAfter(req, ids[i], aggs[i], c)
			if err == nil && !done {
				c.wrote(req, position)
			}
		} else {
			res, done, err = s.plan(req, ids[i], aggs[i])
		}
		if err != nil {
			return nil, false, batchError(i, req, err)
		}
		results[i], written[i] = res, done
		if !done {
			position += int64(len(req.Events))
		}
	}
	var created map[aggKey]*aggregate // by this call, with repeats
	for i := range reqs {
		if written[i] {
			continue
		}
		agg := aggs[i]
		if agg == nil && repeats {
			agg = created[aggKey{reqs[i].AggregateType, reqs[i].AggregateID}]
		}
		if agg == nil {
			// A new aggregate that a later request may write to again is
			// locked before it enters the directory, as those that exist.
			results[i] = s.write(&reqs[i], ids[i], metas[i], nil, repeats)
			if repeats {
				a := s.lookup(reqs[i].AggregateType, reqs[i].AggregateID)
				if created == nil {
					created = make(map[aggKey]*aggregate)
				}
				created[aggKey{reqs[i].AggregateType, reqs[i].AggregateID}] = a
				held = append(held, a)
			}
			continue
		}
		first := agg.events.len()
		results[i] = s.write(&reqs[i], ids[i], metas[i], agg, false)
		index(agg, first, ids[i]) // agg.mu is held
	}
	return results, false, nil
}

// callAgg is an aggregate as the requests of an AppendAll planned so far
// will leave it: its version, and the events they write to it, by id.
type callAgg struct {
	version int64
	events  map[string]storage.Event
}

// wrote notes that req, whose events follow position, will be written.
func (c *callAgg) wrote(req *storage.AppendRequest, position int64) {
	c.version++
	if c.events == nil {
		c.events = make(map[string]storage.Event, len(req.Events))
	}
	for i := range req.Events {
		e := &req.Events[i]
		c.events[e.ID] = storage.Event{ID: e.ID, Type: e.Type, Data: e.Data, EncryptedData: e.EncryptedData,
			Metadata: e.Metadata, Version: c.version, Position: position + int64(i) + 1}
	}
}

// planAfter is plan for a request of an AppendAll after the requests
// before it on its aggregate, which c sums up: its version is c's, and
// its stored events are agg's and those of c.
func (s *store) planAfter(req *storage.AppendRequest, ids []eventID, agg *aggregate, c *callAgg) (storage.AppendResult, bool, error) {
	var stored []storage.Event
	if agg != nil {
		for _, id := range ids {
			if i, ok := agg.ids.find(id.hash, func(i int32) bool { return s.hasID(agg.events.at(int(i)), id.text) }); ok {
				stored = append(stored, s.storedEvent(agg.events.at(int(i))))
			}
		}
	}
	for _, id := range ids {
		if e, ok := c.events[id.text]; ok {
			stored = append(stored, e)
		}
	}
	return storage.PlanAppend(*req, c.version, stored)
}

func batchError(i int, req *storage.AppendRequest, err error) error {
	return &storage.BatchError{Index: i, AggregateType: req.AggregateType, AggregateID: req.AggregateID, Err: err}
}

// plan applies storage.PlanAppend to req, whose event ids are ids, for
// agg (nil when it has no events). It reports whether the request is
// settled (a duplicate) or refused. s.mu and agg.mu are held.
func (s *store) plan(req *storage.AppendRequest, ids []eventID, agg *aggregate) (res storage.AppendResult, done bool, err error) {
	var current int64
	var stored []storage.Event
	if agg != nil {
		current = int64(agg.seqs.len())
		for _, id := range ids {
			if i, ok := agg.ids.find(id.hash, func(i int32) bool { return s.hasID(agg.events.at(int(i)), id.text) }); ok {
				stored = append(stored, s.storedEvent(agg.events.at(int(i))))
			}
		}
	}
	return storage.PlanAppend(*req, current, stored)
}

// storedEvent returns the record r as PlanAppend compares it with a
// retried event: id, type, data (aliasing the arena), encrypted data,
// metadata, version and position. s.mu is held.
func (s *store) storedEvent(r *record) storage.Event {
	text := s.arena.get(r.text)
	end := len(text) - int(r.encLen) - int(r.metaLen)
	e := storage.Event{
		ID: string(text[:idLen]), Type: s.types[r.typ], Version: r.version, Position: r.position,
		EncryptedData: string(text[end : end+int(r.encLen)]),
	}
	if r.hasData {
		e.Data = text[idLen:end]
	}
	if r.metaLen > 0 {
		e.Metadata, _ = storage.ParseMetadata(text[len(text)-int(r.metaLen):]) // encoded by AppendMetadata
	}
	return e
}

// write stores the batch req, planned by plan for agg (nil for a new
// aggregate), and returns its result. s.mu is held, and agg.mu for an
// aggregate that exists, whose id index the caller updates (index). A new
// aggregate is built whole, id index included, before it enters the
// directory; with lock, its agg.mu is locked before, for the caller to
// unlock.
func (s *store) write(req *storage.AppendRequest, ids []eventID, metas [][]byte, agg *aggregate, lock bool) storage.AppendResult {
	created := agg == nil
	if created {
		f := s.byType[req.AggregateType]
		if f == nil {
			f = &feed{}
			s.byType[req.AggregateType] = f
		}
		f.aggCount++
		agg = &aggregate{typ: req.AggregateType, id: req.AggregateID, feed: f, index: int32(s.aggList.len())}
		s.aggList.push(agg)
	}
	f := agg.feed
	f.seq++
	f.batches++
	agg.seqs.push(f.seq)
	version := int64(agg.seqs.len())
	first := agg.events.len()
	for i := range req.Events {
		e := &req.Events[i]
		idx := int32(agg.events.len())
		position := int64(s.log.len()) + 1
		meta := metaAt(metas, i)
		agg.events.push(record{
			typ:      s.intern(e.Type),
			text:     s.arena.add(ids[i].text, e.Data, e.EncryptedData, meta),
			encLen:   uint16(len(e.EncryptedData)),
			metaLen:  uint16(len(meta)),
			hasData:  e.Data != nil,
			version:  version,
			position: position,
			recorded: e.RecordedAt.UnixMicro(),
		})
		s.log.push(ref{agg.index, idx})
		f.positions.push(position)
	}
	if created {
		index(agg, first, ids)
		if lock {
			agg.mu.Lock() // unpublished: nobody else holds it
		}
		s.dir.store(aggKey{req.AggregateType, req.AggregateID}, agg)
	}
	return storage.AppendResult{Version: version, Position: int64(s.log.len())}
}

// index adds ids, the ids of agg's events from first on, to agg's id
// index. agg.mu is held, or agg is not yet in the directory.
func index(agg *aggregate, first int, ids []eventID) {
	for i, id := range ids {
		agg.ids.add(id.hash, int32(first+i))
	}
}

// hasID reports whether the event r has the id id. s.mu is held.
func (s *store) hasID(r *record, id string) bool {
	return string(s.arena.get(r.text)[:idLen]) == id // no copy: compared in place
}

// intern returns the index of typ in s.types, adding it when it is new.
// Saves mostly repeat the type of the event before, which is checked
// before the map. s.mu is held.
func (s *store) intern(typ string) uint32 {
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
