package storagetest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// Deliberately broken storages, each wrapping the memory backend with one
// defect the suite must catch (as testing/fstest's own tests use shuffledFS
// and failPermFS).

// noVersionCheck ignores the expected version of a save.
type noVersionCheck struct{ *memory.Storage }

func (s noVersionCheck) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	req.ExpectedVersion = eventstore.VersionCheck{}
	return s.Storage.Append(ctx, req)
}

// racyVersionCheck checks the expected version outside the atomic step of
// the append (check, then act), the classic lost-update bug.
type racyVersionCheck struct{ *memory.Storage }

func (s racyVersionCheck) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	if want, ok := req.ExpectedVersion.Version(); ok {
		var current int64
		agg, err := s.Storage.Load(ctx, eventstore.LoadQuery{AggregateType: req.AggregateType, AggregateID: req.AggregateID})
		switch {
		case err == nil:
			current = agg.Version
		case !errors.Is(err, eventstore.ErrNotFound):
			return eventstore.AppendResult{}, err
		}
		if current != want {
			return eventstore.AppendResult{}, fmt.Errorf("version %d, not %d: %w", current, want, eventstore.ErrConflict)
		}
		time.Sleep(2 * time.Millisecond) // widen the window a real database has
		req.ExpectedVersion = eventstore.VersionCheck{}
	}
	return s.Storage.Append(ctx, req)
}

// feedGap drops every event whose position is a multiple of 5 from feed
// pages, while Head still covers it.
type feedGap struct{ *memory.Storage }

func (s feedGap) ReadFeed(ctx context.Context, q eventstore.FeedQuery) (eventstore.FeedPage, error) {
	page, err := s.Storage.ReadFeed(ctx, q)
	page.Events = slices.DeleteFunc(page.Events, func(e eventstore.Event) bool { return e.Position%5 == 0 })
	return page, err
}

// headSkips reports a Head one past the last returned event when a page is
// full, skipping the event that follows it.
type headSkips struct{ *memory.Storage }

func (s headSkips) ReadFeed(ctx context.Context, q eventstore.FeedQuery) (eventstore.FeedPage, error) {
	page, err := s.Storage.ReadFeed(ctx, q)
	if n := len(page.Events); n > 0 && n == q.Limit {
		page.Head = page.Events[n-1].Position + 1
	}
	return page, err
}

// inFlightSkip simulates the classic failure of SQL event stores: a save
// takes its positions, then stays in flight (uncommitted, invisible) for a
// while, and ReadFeed meanwhile returns later positions and moves Head past
// the in-flight ones. Sequential tests cannot see it; a follower under
// concurrent writers must.
type inFlightSkip struct {
	*memory.Storage
	mu       *sync.Mutex
	inFlight map[int64]bool
}

func newInFlightSkip() inFlightSkip {
	return inFlightSkip{memory.New(), new(sync.Mutex), make(map[int64]bool)}
}

func (s inFlightSkip) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
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

func (s inFlightSkip) ReadFeed(ctx context.Context, q eventstore.FeedQuery) (eventstore.FeedPage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	page, err := s.Storage.ReadFeed(ctx, q)
	page.Events = slices.DeleteFunc(page.Events, func(e eventstore.Event) bool { return s.inFlight[e.Position] })
	return page, err
}

// reversedLoad returns an aggregate's events newest first.
type reversedLoad struct{ *memory.Storage }

func (s reversedLoad) Load(ctx context.Context, q eventstore.LoadQuery) (eventstore.Aggregate, error) {
	agg, err := s.Storage.Load(ctx, q)
	slices.Reverse(agg.Events)
	return agg, err
}

// noCAS commits whatever checkpoint the projection is at, ignoring From.
type noCAS struct{ *memory.Storage }

func (s noCAS) CommitProjection(ctx context.Context, c eventstore.ProjectionCommit) error {
	for {
		d, err := s.Storage.Definition(ctx, c.Name)
		if err != nil {
			return err
		}
		c.From = d.Checkpoint
		err = s.Storage.CommitProjection(ctx, c)
		if !errors.Is(err, eventstore.ErrConflict) {
			return err
		}
		if d2, derr := s.Storage.Definition(ctx, c.Name); derr == nil && d2.Checkpoint == d.Checkpoint {
			return err // refused for another reason than the checkpoint (its Spec)
		}
	}
}

// splitCommit writes the states and errors in one step and moves the
// checkpoint in another, so a commit that loses the race leaves its states.
type splitCommit struct{ *memory.Storage }

func (s splitCommit) CommitProjection(ctx context.Context, c eventstore.ProjectionCommit) error {
	d, err := s.Storage.Definition(ctx, c.Name)
	if err != nil {
		return err
	}
	states := eventstore.ProjectionCommit{Name: c.Name, From: d.Checkpoint, To: d.Checkpoint, States: c.States, Errors: c.Errors}
	if err := s.Storage.CommitProjection(ctx, states); err != nil {
		return err
	}
	return s.Storage.CommitProjection(ctx, eventstore.ProjectionCommit{Name: c.Name, From: c.From, To: c.To})
}

// appendAllPartial writes the batches of AppendAll one at a time, so a
// refused batch leaves the batches before it written.
type appendAllPartial struct{ *memory.Storage }

func (s appendAllPartial) AppendAll(ctx context.Context, reqs []eventstore.AppendRequest) ([]eventstore.AppendResult, error) {
	results := make([]eventstore.AppendResult, len(reqs))
	for i, req := range reqs {
		res, err := s.Storage.Append(ctx, req)
		if err != nil {
			return nil, &eventstore.BatchError{Index: i, AggregateType: req.AggregateType, AggregateID: req.AggregateID, Err: err}
		}
		results[i] = res
	}
	return results, nil
}

// listIgnoresSkip returns every page of ListProjections from the first
// match.
type listIgnoresSkip struct{ *memory.Storage }

func (s listIgnoresSkip) ListProjections(ctx context.Context, q eventstore.ProjectionQuery) (eventstore.ProjectionList, error) {
	q.Skip = 0
	return s.Storage.ListProjections(ctx, q)
}

// headFromLiveEvents computes FeedHead from the events still stored, as a
// MAX() query over the events table would, so the head goes down when the
// latest batch is deleted.
type headFromLiveEvents struct{ *memory.Storage }

func (s headFromLiveEvents) FeedHead(ctx context.Context, typ string) (int64, error) {
	var head int64
	found := false
	for q := (eventstore.FeedQuery{Limit: 100, AggregateType: typ}); ; {
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
		return 0, fmt.Errorf("feed %q: %w", typ, eventstore.ErrNotFound)
	}
	return head, nil
}

// seqPerAggregate numbers batches per aggregate instead of per type: it
// reports each event's Version as its FeedSequence.
type seqPerAggregate struct{ *memory.Storage }

func (s seqPerAggregate) Load(ctx context.Context, q eventstore.LoadQuery) (eventstore.Aggregate, error) {
	agg, err := s.Storage.Load(ctx, q)
	for i := range agg.Events {
		agg.Events[i].FeedSequence = agg.Events[i].Version
	}
	return agg, err
}

func (s seqPerAggregate) ReadFeed(ctx context.Context, q eventstore.FeedQuery) (eventstore.FeedPage, error) {
	page, err := s.Storage.ReadFeed(ctx, q)
	for i := range page.Events {
		page.Events[i].FeedSequence = page.Events[i].Version
	}
	return page, err
}

// variant is one storage the suite runs against in a subprocess, with the
// subtests that must fail on it (none for a healthy storage).
type variant struct {
	open     func() eventstore.Storage
	wantFail []string
}

func variants() map[string]variant {
	return map[string]variant{
		"healthy": {func() eventstore.Storage { return memory.New() }, nil},
		"noVersionCheck": {func() eventstore.Storage { return noVersionCheck{memory.New()} },
			[]string{"ExpectVersion", "ExpectVersionConcurrent"}},
		"racyVersionCheck": {func() eventstore.Storage { return racyVersionCheck{memory.New()} },
			[]string{"ExpectVersionConcurrent"}},
		"feedGap": {func() eventstore.Storage { return feedGap{memory.New()} },
			[]string{"ReadFeedAll", "ReadFeedPaging", "FeedCompleteUnderConcurrentWriters", "FilteredFeedCompleteUnderConcurrentWriters"}},
		"headSkips": {func() eventstore.Storage { return headSkips{memory.New()} },
			[]string{"ReadFeedPaging", "FeedCompleteUnderConcurrentWriters", "FilteredFeedCompleteUnderConcurrentWriters"}},
		"inFlightSkip": {func() eventstore.Storage { return newInFlightSkip() },
			[]string{"FeedCompleteUnderConcurrentWriters", "FilteredFeedCompleteUnderConcurrentWriters"}},
		"reversedLoad": {func() eventstore.Storage { return reversedLoad{memory.New()} },
			[]string{"SaveCreatesAggregate", "VersionsCountSaves"}},
		"noCAS": {func() eventstore.Storage { return noCAS{memory.New()} },
			[]string{"CommitProjectionChecksFrom", "CommitProjectionConcurrent"}},
		"splitCommit": {func() eventstore.Storage { return splitCommit{memory.New()} },
			[]string{"CommitProjectionChecksFrom", "CommitProjectionConcurrent"}},
		"appendAllPartial": {func() eventstore.Storage { return appendAllPartial{memory.New()} },
			[]string{"AppendAllIsAtomic"}},
		"listIgnoresSkip": {func() eventstore.Storage { return listIgnoresSkip{memory.New()} },
			[]string{"ListProjectionsPaging", "ListProjectionsFilters"}},
		"headFromLiveEvents": {func() eventstore.Storage { return headFromLiveEvents{memory.New()} },
			[]string{"DeleteNeverReusesNumbers"}},
		"seqPerAggregate": {func() eventstore.Storage { return seqPerAggregate{memory.New()} },
			[]string{"FeedSequenceNumbersBatches", "FeedCompleteUnderConcurrentAppendAll", "DeleteAggregate"}},
	}
}
