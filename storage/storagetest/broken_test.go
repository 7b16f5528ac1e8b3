package storagetest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// Deliberately broken storages, each wrapping the memory backend with one
// defect the suite must catch (as testing/fstest's own tests use shuffledFS
// and failPermFS).

// noVersionCheck ignores the expected version of a save.
type noVersionCheck struct{ storage.Storage }

func (s noVersionCheck) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	req.ExpectedVersion = storage.VersionCheck{}
	return s.Storage.Append(ctx, req)
}

// racyVersionCheck checks the expected version outside the atomic step of
// the append (check, then act), the classic lost-update bug.
type racyVersionCheck struct{ storage.Storage }

func (s racyVersionCheck) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	if want, ok := req.ExpectedVersion.Version(); ok {
		var current int64
		agg, err := s.Storage.Load(ctx, storage.LoadQuery{AggregateType: req.AggregateType, AggregateID: req.AggregateID})
		switch {
		case err == nil:
			current = agg.Version
		case !errors.Is(err, storage.ErrNotFound):
			return storage.AppendResult{}, err
		}
		if current != want {
			return storage.AppendResult{}, fmt.Errorf("version %d, not %d: %w", current, want, storage.ErrConflict)
		}
		time.Sleep(2 * time.Millisecond) // widen the window a real database has
		req.ExpectedVersion = storage.VersionCheck{}
	}
	return s.Storage.Append(ctx, req)
}

// feedGap drops every event whose position is a multiple of 5 from feed
// pages, while Head still covers it.
type feedGap struct{ storage.Storage }

func (s feedGap) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	page, err := s.Storage.ReadFeed(ctx, q)
	page.Events = slices.DeleteFunc(page.Events, func(e storage.Event) bool { return e.Position%5 == 0 })
	return page, err
}

// headSkips reports a Head one past the last returned event when a page is
// full, skipping the event that follows it.
type headSkips struct{ storage.Storage }

func (s headSkips) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	page, err := s.Storage.ReadFeed(ctx, q)
	if n := len(page.Events); n > 0 && n == q.Limit {
		page.Head = page.Events[n-1].Position + 1
	}
	return page, err
}

// dateStopsEarly assumes RecordedAt rises with the position: a read by
// date ends at the first event recorded after To, as a backend that
// translated the range into positions would.
type dateStopsEarly struct{ storage.Storage }

func (s dateStopsEarly) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	if q.To.IsZero() {
		return s.Storage.ReadFeed(ctx, q)
	}
	to := q.To
	q.To = time.Time{}
	page, err := s.Storage.ReadFeed(ctx, q)
	for i, e := range page.Events {
		if e.RecordedAt.After(to) {
			// Nothing after it is taken to be in the range: on to the end.
			head, herr := s.Storage.FeedHead(ctx, "")
			page.Events, page.Head, page.Truncated = page.Events[:i], max(q.After, head), false
			return page, errors.Join(err, herr)
		}
	}
	return page, err
}

// dateExclusiveTo treats To as exclusive.
type dateExclusiveTo struct{ storage.Storage }

func (s dateExclusiveTo) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	if !q.To.IsZero() {
		q.To = q.To.Add(-time.Microsecond)
	}
	return s.Storage.ReadFeed(ctx, q)
}

// inFlightSkip simulates the classic failure of SQL event stores: a save
// takes its positions, then stays in flight (uncommitted, invisible) for a
// while, and ReadFeed meanwhile returns later positions and moves Head past
// the in-flight ones. Sequential tests cannot see it; a follower under
// concurrent writers must.
type inFlightSkip struct {
	storage.Storage
	mu       *sync.Mutex
	inFlight map[int64]bool
}

func newInFlightSkip() inFlightSkip {
	return inFlightSkip{memory.New(), new(sync.Mutex), make(map[int64]bool)}
}

func (s inFlightSkip) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	s.mu.Lock()
	res, err := s.Storage.Append(ctx, req)
	first := res.Position - int64(len(req.Events)) + 1
	if err == nil && !res.Duplicate {
		for p := first; p <= res.Position; p++ {
			s.inFlight[p] = true
		}
	}
	s.mu.Unlock()
	if err != nil || res.Duplicate {
		return res, err
	}
	time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond) // the commit takes a while
	s.mu.Lock()
	for p := first; p <= res.Position; p++ {
		delete(s.inFlight, p)
	}
	s.mu.Unlock()
	return res, nil
}

func (s inFlightSkip) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	page, err := s.Storage.ReadFeed(ctx, q)
	page.Events = slices.DeleteFunc(page.Events, func(e storage.Event) bool { return s.inFlight[e.Position] })
	return page, err
}

// reversedLoad returns an aggregate's events newest first.
type reversedLoad struct{ storage.Storage }

func (s reversedLoad) Load(ctx context.Context, q storage.LoadQuery) (storage.Aggregate, error) {
	agg, err := s.Storage.Load(ctx, q)
	slices.Reverse(agg.Events)
	return agg, err
}

// noCAS commits whatever checkpoint the projection is at, ignoring From.
type noCAS struct{ storage.Storage }

func (s noCAS) CommitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	for {
		d, err := s.Storage.Definition(ctx, c.Name)
		if err != nil {
			return err
		}
		c.From = d.Checkpoint
		err = s.Storage.CommitProjection(ctx, c)
		if !errors.Is(err, storage.ErrConflict) {
			return err
		}
		if d2, derr := s.Storage.Definition(ctx, c.Name); derr == nil && d2.Checkpoint == d.Checkpoint {
			return err // refused for another reason than the checkpoint (its Spec)
		}
	}
}

// splitCommit writes the states and errors in one step and moves the
// checkpoint in another, so a commit that loses the race leaves its states.
type splitCommit struct{ storage.Storage }

func (s splitCommit) CommitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	d, err := s.Storage.Definition(ctx, c.Name)
	if err != nil {
		return err
	}
	states := storage.ProjectionCommit{Name: c.Name, From: d.Checkpoint, To: d.Checkpoint, States: c.States, Errors: c.Errors}
	if err := s.Storage.CommitProjection(ctx, states); err != nil {
		return err
	}
	return s.Storage.CommitProjection(ctx, storage.ProjectionCommit{Name: c.Name, From: c.From, To: c.To})
}

// appendAllPartial writes the batches of AppendAll one at a time, so a
// refused batch leaves the batches before it written.
type appendAllPartial struct{ storage.Storage }

func (s appendAllPartial) AppendAll(ctx context.Context, reqs []storage.AppendRequest) ([]storage.AppendResult, error) {
	results := make([]storage.AppendResult, len(reqs))
	for i, req := range reqs {
		res, err := s.Storage.Append(ctx, req)
		if err != nil {
			return nil, &storage.BatchError{Index: i, AggregateType: req.AggregateType, AggregateID: req.AggregateID, Err: err}
		}
		results[i] = res
	}
	return results, nil
}

// listIgnoresSkip returns every page of ListProjections from the first
// match.
type listIgnoresSkip struct{ storage.Storage }

func (s listIgnoresSkip) ListProjections(ctx context.Context, q storage.ProjectionQuery) (storage.ProjectionList, error) {
	q.Skip = 0
	return s.Storage.ListProjections(ctx, q)
}

// aggregatesFirstVersion lists each aggregate with the version and time
// of its first save, as an index of first events alone would.
type aggregatesFirstVersion struct{ storage.Storage }

func (s aggregatesFirstVersion) ListAggregates(ctx context.Context, q storage.AggregateQuery) (storage.AggregateList, error) {
	list, err := s.Storage.ListAggregates(ctx, q)
	for i := range list.Aggregates {
		list.Aggregates[i].Version, list.Aggregates[i].UpdatedAt = 1, list.Aggregates[i].CreatedAt
	}
	return list, err
}

// aggregatesIgnoreSkip returns every page of ListAggregates from the first
// aggregate.
type aggregatesIgnoreSkip struct{ storage.Storage }

func (s aggregatesIgnoreSkip) ListAggregates(ctx context.Context, q storage.AggregateQuery) (storage.AggregateList, error) {
	q.Skip = 0
	return s.Storage.ListAggregates(ctx, q)
}

// searchIgnored lists as if no search were asked for.
type searchIgnored struct{ storage.Storage }

func (s searchIgnored) ListProjections(ctx context.Context, q storage.ProjectionQuery) (storage.ProjectionList, error) {
	q.Search = nil
	return s.Storage.ListProjections(ctx, q)
}

// searchTextDropped never indexes: it drops every state's SearchText.
type searchTextDropped struct{ storage.Storage }

func (s searchTextDropped) CommitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	c.States = slices.Clone(c.States)
	for i := range c.States {
		c.States[i].SearchText = ""
	}
	return s.Storage.CommitProjection(ctx, c)
}

// headFromLiveEvents computes FeedHead from the events still stored, as a
// MAX() query over the events table would, so the head goes down when the
// latest batch is deleted.
type headFromLiveEvents struct{ storage.Storage }

func (s headFromLiveEvents) FeedHead(ctx context.Context, typ string) (int64, error) {
	var head int64
	found := false
	for q := (storage.FeedQuery{Limit: 100, AggregateType: typ}); ; {
		page, err := s.Storage.ReadFeed(ctx, q)
		if err != nil {
			return 0, err
		}
		for _, e := range page.Events {
			found = true
			head = e.Position
			if typ != "" {
				head = e.FeedSequence
			}
		}
		if len(page.Events) == 0 {
			break
		}
		q.After = page.Head
	}
	if !found && typ != "" {
		return 0, fmt.Errorf("feed %q: %w", typ, storage.ErrNotFound)
	}
	return head, nil
}

// seqPerAggregate numbers batches per aggregate instead of per type: it
// reports each event's Version as its FeedSequence.
type seqPerAggregate struct{ storage.Storage }

func (s seqPerAggregate) Load(ctx context.Context, q storage.LoadQuery) (storage.Aggregate, error) {
	agg, err := s.Storage.Load(ctx, q)
	for i := range agg.Events {
		agg.Events[i].FeedSequence = agg.Events[i].Version
	}
	return agg, err
}

func (s seqPerAggregate) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	page, err := s.Storage.ReadFeed(ctx, q)
	for i := range page.Events {
		page.Events[i].FeedSequence = page.Events[i].Version
	}
	return page, err
}

// feedSeqFromLiveMax numbers a type's batches from the FeedSequences still
// stored, as an append computing max(feed_sequence) + 1 over the live
// events would: once the type's latest batches are deleted, the next batch
// reuses a deleted number and FeedHead of the type goes down. It keeps
// the memory backend's own numbers underneath and translates them.
type feedSeqFromLiveMax struct {
	storage.Storage
	mu  *sync.Mutex
	seq map[typeSeq]int64 // the memory backend's FeedSequence of a type's batch → this store's
}

// typeSeq is a FeedSequence of an aggregate type.
type typeSeq struct {
	typ string
	seq int64
}

func newFeedSeqFromLiveMax() feedSeqFromLiveMax {
	return feedSeqFromLiveMax{memory.New(), new(sync.Mutex), make(map[typeSeq]int64)}
}

// liveMax returns the highest FeedSequence this store gave to an event of
// typ that is still stored (0 for none). The caller holds s.mu.
func (s feedSeqFromLiveMax) liveMax(ctx context.Context, typ string) (int64, error) {
	var top int64
	for q := (storage.FeedQuery{Limit: 100, AggregateType: typ}); ; {
		page, err := s.Storage.ReadFeed(ctx, q)
		if err != nil {
			return 0, err
		}
		for _, e := range page.Events {
			top = max(top, s.seq[typeSeq{typ, e.FeedSequence}])
		}
		if len(page.Events) == 0 {
			return top, nil
		}
		q.After = page.Head
	}
}

// number gives the batch just stored by req at version v the next number
// after the live maximum. The caller holds s.mu.
func (s feedSeqFromLiveMax) number(ctx context.Context, req storage.AppendRequest, v int64) error {
	agg, err := s.Storage.Load(ctx, storage.LoadQuery{AggregateType: req.AggregateType, AggregateID: req.AggregateID, AfterVersion: v - 1, Limit: 1})
	if err != nil || len(agg.Events) == 0 {
		return errors.Join(err, errors.New("the batch just stored is not there"))
	}
	k := typeSeq{req.AggregateType, agg.Events[0].FeedSequence}
	s.seq[k] = 0
	top, err := s.liveMax(ctx, req.AggregateType)
	s.seq[k] = top + 1
	return err
}

func (s feedSeqFromLiveMax) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.Storage.Append(ctx, req)
	if err == nil && !res.Duplicate {
		err = s.number(ctx, req, res.Version)
	}
	return res, err
}

func (s feedSeqFromLiveMax) AppendAll(ctx context.Context, reqs []storage.AppendRequest) ([]storage.AppendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	results, err := s.Storage.AppendAll(ctx, reqs)
	for i := range results {
		if err == nil && !results[i].Duplicate {
			err = s.number(ctx, reqs[i], results[i].Version)
		}
	}
	return results, err
}

// translate replaces the memory backend's FeedSequences of events by this
// store's. The caller holds s.mu.
func (s feedSeqFromLiveMax) translate(events []storage.Event) {
	for i := range events {
		events[i].FeedSequence = s.seq[typeSeq{events[i].AggregateType, events[i].FeedSequence}]
	}
}

func (s feedSeqFromLiveMax) Load(ctx context.Context, q storage.LoadQuery) (storage.Aggregate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	agg, err := s.Storage.Load(ctx, q)
	s.translate(agg.Events)
	return agg, err
}

func (s feedSeqFromLiveMax) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	page, err := s.Storage.ReadFeed(ctx, q)
	s.translate(page.Events)
	return page, err
}

func (s feedSeqFromLiveMax) FeedHead(ctx context.Context, typ string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	head, err := s.Storage.FeedHead(ctx, typ)
	if err != nil || typ == "" {
		return head, err
	}
	return s.liveMax(ctx, typ)
}

// blindUpdateSpec replaces the spec whatever the stored one is.
type blindUpdateSpec struct{ storage.Storage }

func (s blindUpdateSpec) UpdateSpec(ctx context.Context, name string, _, spec []byte) error {
	d, err := s.Storage.Definition(ctx, name)
	if err != nil {
		return err
	}
	return s.Storage.UpdateSpec(ctx, name, d.Spec, spec)
}

// updateSpecRecreates replaces the spec by recreating the definition,
// which drops its checkpoint, instances and errors (a rebuild).
type updateSpecRecreates struct{ storage.Storage }

func (s updateSpecRecreates) UpdateSpec(ctx context.Context, name string, old, spec []byte) error {
	d, err := s.Storage.Definition(ctx, name)
	if err != nil {
		return err
	}
	if !bytes.Equal(d.Spec, old) {
		return fmt.Errorf("replaced: %w", storage.ErrConflict)
	}
	if err := s.Storage.DeleteDefinition(ctx, name); err != nil {
		return err
	}
	d.Spec = spec
	return s.Storage.CreateDefinition(ctx, d)
}

// variant is one storage the suite runs against in a subprocess, with the
// subtests that must fail on it (none for a healthy storage).
type variant struct {
	open     func() storage.Storage
	wantFail []string
}

func variants() map[string]variant {
	return map[string]variant{
		"healthy": {func() storage.Storage { return memory.New() }, nil},
		"noVersionCheck": {func() storage.Storage { return noVersionCheck{memory.New()} },
			[]string{"ExpectVersion", "ExpectVersionConcurrent"}},
		"racyVersionCheck": {func() storage.Storage { return racyVersionCheck{memory.New()} },
			[]string{"ExpectVersionConcurrent"}},
		"feedGap": {func() storage.Storage { return feedGap{memory.New()} },
			[]string{"ReadFeedAll", "ReadFeedPaging", "FeedCompleteUnderConcurrentWriters", "FilteredFeedCompleteUnderConcurrentWriters"}},
		"headSkips": {func() storage.Storage { return headSkips{memory.New()} },
			[]string{"ReadFeedPaging", "FeedCompleteUnderConcurrentWriters", "FilteredFeedCompleteUnderConcurrentWriters"}},
		"inFlightSkip": {func() storage.Storage { return newInFlightSkip() },
			[]string{"FeedCompleteUnderConcurrentWriters", "FilteredFeedCompleteUnderConcurrentWriters"}},
		"reversedLoad": {func() storage.Storage { return reversedLoad{memory.New()} },
			[]string{"SaveCreatesAggregate", "VersionsCountSaves"}},
		"noCAS": {func() storage.Storage { return noCAS{memory.New()} },
			[]string{"CommitProjectionChecksFrom", "CommitProjectionConcurrent"}},
		"splitCommit": {func() storage.Storage { return splitCommit{memory.New()} },
			[]string{"CommitProjectionChecksFrom", "CommitProjectionConcurrent"}},
		"appendAllPartial": {func() storage.Storage { return appendAllPartial{memory.New()} },
			[]string{"AppendAllIsAtomic"}},
		"listIgnoresSkip": {func() storage.Storage { return listIgnoresSkip{memory.New()} },
			[]string{"ListProjectionsPaging", "ListProjectionsFilters"}},
		"aggregatesFirstVersion": {func() storage.Storage { return aggregatesFirstVersion{memory.New()} },
			[]string{"ListAggregatesOrder", "ListAggregatesFollowsSaves"}},
		"aggregatesIgnoreSkip": {func() storage.Storage { return aggregatesIgnoreSkip{memory.New()} },
			[]string{"ListAggregatesPaging", "ListAggregatesAfterDelete"}},
		"searchIgnored": {func() storage.Storage { return searchIgnored{memory.New()} },
			[]string{"SearchPrefixWords", "SearchCombined", "SearchChanges", "SearchResetRename", "SearchProjector"}},
		"searchTextDropped": {func() storage.Storage { return searchTextDropped{memory.New()} },
			[]string{"SearchPrefixWords", "SearchCombined", "SearchChanges", "SearchResetRename", "SearchProjector"}},
		"headFromLiveEvents": {func() storage.Storage { return headFromLiveEvents{memory.New()} },
			[]string{"DeleteNeverReusesNumbers"}},
		"feedSeqFromLiveMax": {func() storage.Storage { return newFeedSeqFromLiveMax() },
			[]string{"DeleteNeverReusesNumbers", "DeleteAggregateType"}},
		"blindUpdateSpec": {func() storage.Storage { return blindUpdateSpec{memory.New()} },
			[]string{"UpdateSpec"}},
		"updateSpecRecreates": {func() storage.Storage { return updateSpecRecreates{memory.New()} },
			[]string{"UpdateSpec", "ProjectionDescriptionInPlace"}},
		"dateStopsEarly": {func() storage.Storage { return dateStopsEarly{memory.New()} },
			[]string{"ReadFeedByDate", "ReadFeedByDateAfterFeedSequence"}},
		"dateExclusiveTo": {func() storage.Storage { return dateExclusiveTo{memory.New()} },
			[]string{"ReadFeedByDate"}},
		"snapshotHealthy": {func() storage.Storage { return newOwnSnapshots(memory.New()) }, nil},
		"snapshotLastWins": {func() storage.Storage { s := newOwnSnapshots(memory.New()); s.lastWins = true; return s },
			[]string{"SnapshotNewestWins"}},
		"snapshotKeptOnDelete": {func() storage.Storage { s := newOwnSnapshots(memory.New()); s.keepOnDrop = true; return s },
			[]string{"SnapshotDeletedWithAggregate", "SnapshotSaveRacesDeletion"}},
		"snapshotRacyCheck": {func() storage.Storage { s := newOwnSnapshots(memory.New()); s.racy = true; return s },
			[]string{"SnapshotSaveRacesDeletion"}},
		"seqPerAggregate": {func() storage.Storage { return seqPerAggregate{memory.New()} },
			[]string{"FeedSequenceNumbersBatches", "FeedCompleteUnderConcurrentAppendAll", "DeleteAggregate"}},
	}
}
