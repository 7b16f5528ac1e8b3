package memory

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// Load implements storage.Storage. The range is found by binary search
// on the aggregate's versions.
func (s *store) Load(ctx context.Context, q storage.LoadQuery) (storage.Aggregate, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return storage.Aggregate{}, err
	}
	agg := s.lookup(q.AggregateType, q.AggregateID)
	if agg == nil {
		return storage.Aggregate{}, fmt.Errorf("aggregate %s/%s: %w", q.AggregateType, q.AggregateID, storage.ErrNotFound)
	}
	ai := agg.index
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
	return storage.Aggregate{
		Type:    q.AggregateType,
		ID:      q.AggregateID,
		Version: int64(agg.seqs.len()),
		Events:  s.build(refs),
	}, nil
}

// ReadFeed implements storage.Storage. Positions are assigned under the
// write lock, so every position up to the last one is always visible.
func (s *store) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return storage.FeedPage{}, err
	}
	limit := max(q.Limit, 1)
	head := int64(s.log.len())
	after := max(q.After, 0)
	page := storage.FeedPage{Head: max(after, head)}
	var refs []ref
	from, to, dated := q.RecordedRange()
	switch {
	case dated:
		refs, page.Head = s.readDated(&q, after, head, limit, from, to)
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

// readDated reads the events after position after recorded within
// [from, to] (Unix microseconds), at most limit, and returns them with the
// page's Head. It scans the feed, or the type's, from after on.
func (s *store) readDated(q *storage.FeedQuery, after, head int64, limit int, from, to int64) ([]ref, int64) {
	if from > to {
		return nil, max(after, head)
	}
	var refs []ref
	keep := func(r ref) bool {
		if r.agg < 0 {
			return false
		}
		rec := (*s.aggList.at(int(r.agg))).events.at(int(r.idx))
		return from <= rec.recorded && rec.recorded <= to
	}
	if q.AggregateType == "" {
		for p := after; p < head; p++ {
			if r := *s.log.at(int(p)); keep(r) {
				if len(refs) == limit {
					return refs, p // the last position returned, or a later one left out
				}
				refs = append(refs, r)
			}
		}
		return refs, max(after, head)
	}
	f := s.byType[q.AggregateType]
	if f == nil {
		return nil, max(after, head)
	}
	all := &f.positions
	i := all.search(0, func(p *int64) bool { return *p > after })
	if q.AfterFeedSequence > 0 {
		i = max(i, all.search(0, func(p *int64) bool { return s.feedSeq(*p) > q.AfterFeedSequence }))
	}
	for ; i < all.len(); i++ {
		if r := *s.log.at(int(*all.at(i)) - 1); keep(r) {
			if len(refs) == limit {
				return refs, *all.at(i - 1)
			}
			refs = append(refs, r)
		}
	}
	return refs, max(after, head)
}

// budget returns how many of refs a read with a byte budget of max keeps
// (see storage.LoadQuery.MaxBytes and FeedQuery.MaxBytes): all when
// max is not positive, else up to the first event, or with byVersion the
// end of the first version, with which their data, encrypted data and
// metadata reach max.
func (s *store) budget(refs []ref, max int64, byVersion bool) int {
	if max <= 0 {
		return len(refs)
	}
	var total int64
	for i, r := range refs {
		rec := (*s.aggList.at(int(r.agg))).events.at(int(r.idx))
		total += int64(rec.text.n) - idLen // data, encrypted data and metadata (storage.EventBytes)
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
func (s *store) feedSeq(p int64) int64 {
	r := s.log.at(int(p) - 1)
	a := *s.aggList.at(int(r.agg))
	return *a.seqs.at(int(a.events.at(int(r.idx)).version) - 1)
}

// build turns the records at refs into events that the caller owns, with
// one allocation each for the events, their ids, their data and their
// encrypted data, and for the events with metadata its decoding.
func (s *store) build(refs []ref) []storage.Event {
	dataLen, encLen, metaLen := 0, 0, 0
	for _, r := range refs {
		rec := (*s.aggList.at(int(r.agg))).events.at(int(r.idx))
		dataLen += int(rec.text.n) - idLen - int(rec.encLen) - int(rec.metaLen)
		encLen += int(rec.encLen)
		metaLen += int(rec.metaLen)
	}
	data := make([]byte, 0, dataLen)
	var idText, encText strings.Builder // String does not copy
	idText.Grow(idLen * len(refs))
	encText.Grow(encLen)
	events := make([]storage.Event, len(refs))
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
		end := len(text) - int(rec.encLen) - int(rec.metaLen)
		if rec.hasData {
			start := len(data)
			data = append(data, text[idLen:end]...)
			e.Data = data[start:len(data):len(data)]
		}
		if rec.encLen > 0 {
			encText.Write(text[end : end+int(rec.encLen)])
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
	if metaLen > 0 {
		s.buildMetadata(refs, events, metaLen)
	}
	return events
}

// buildMetadata decodes the metadata of the records at refs into events,
// from one string of metaLen bytes copied from the arena.
func (s *store) buildMetadata(refs []ref, events []storage.Event, metaLen int) {
	var b strings.Builder
	b.Grow(metaLen)
	for _, r := range refs {
		rec := (*s.aggList.at(int(r.agg))).events.at(int(r.idx))
		if rec.metaLen > 0 {
			text := s.arena.get(rec.text)
			b.Write(text[len(text)-int(rec.metaLen):])
		}
	}
	all, off := b.String(), 0
	for k, r := range refs {
		if n := int((*s.aggList.at(int(r.agg))).events.at(int(r.idx)).metaLen); n > 0 {
			// Encoded by AppendMetadata at the append: it decodes.
			events[k].Metadata, _ = storage.ParseMetadataString(all[off : off+n])
			off += n
		}
	}
}
