package eventstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/eventkit-go/eventstore/internal/lang"
	"github.com/eventkit-go/eventstore/internal/names"
	"github.com/eventkit-go/eventstore/storage"
	"go.opentelemetry.io/otel/trace"
)

// catchUp applies the feed to pr until the projection covers target and
// the feed shows nothing more. Only one goroutine of this Projector applies
// a given projection at a time; other processes are excluded by the
// checkpoint compare-and-set of CommitProjection.
func (p *Projector) catchUp(ctx context.Context, pr *proj, target int64, cache *pageCache) (err error) {
	name := pr.name
	ctx, span := p.store.tracer.Start(ctx, spanCatchUp, trace.SpanKindInternal)
	if span.Started() {
		defer func() {
			span.SetAttributes(attrProjection.String(name), attrCheckpoint.Int64(pr.checkpoint.Load()))
			fail(span, err)
			span.End()
		}()
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	defer pr.trimRecent()
	if pr.checkpoint.Load() >= target && target > 0 && p.running.Load() > 0 {
		return nil // applied while we waited for the lock
	}
	// A deletion that this Projector's record does not hear of (it
	// started Run after the deletion listed the running Projectors) may
	// reset the projection while this catch-up runs on what it read
	// before: then its progress is not recorded in pr (the next query
	// catches up from the storage). The Store counts deletions before and
	// after they reset projections, and those in progress: a catch-up
	// records its progress only if none was in progress when it did, and
	// none began or ended since it began.
	gen := p.store.deletions.Load()
	c := pr.c.Load()
	var stored int64 // what the storage has committed
	// read reads the definition: its checkpoint, and its spec when it was
	// replaced (perhaps by another process).
	read := func() error {
		rec, err := p.storage.Definition(ctx, name)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				p.forget(name)
			}
			return fmt.Errorf("projection %q: %w", name, err)
		}
		if !bytes.Equal(rec.Spec, pr.spec) {
			if c, err = p.refresh(pr, rec); err != nil {
				return err
			}
		}
		stored = rec.Checkpoint
		reset, err := p.checkRewound(ctx, pr, stored)
		if err != nil {
			return err
		}
		if reset {
			stored = 0
		}
		pr.remember(stored, gen)
		return nil
	}
	// unverified is set while stored is what this Projector remembers
	// (see proj.stored) rather than what it read: a commit verifies it
	// (its compare-and-set refuses a stale one), and so does a read of the
	// definition before the catch-up ends without committing.
	unverified := pr.storedOK && pr.storedGen == gen && p.store.deleting.Load() == 0
	if unverified {
		stored = pr.stored
	} else if err := read(); err != nil {
		return err
	}
	at := stored // how far this call has verified the feed
	readPage := func(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
		if cache != nil {
			return cache.read(ctx, q)
		}
		return p.storage.ReadFeed(ctx, q)
	}
	var ahead *pageAhead // the next page, being read
	defer func() { ahead.stop() }()
	wait := time.Millisecond
	var waited, checked time.Duration // waiting for target; when it last asked for a rewind
	for {
		if c.foreign() {
			if unverified {
				// What this Projector remembers may predate a swap or
				// a replacement that it registers the code of.
				unverified = false
				if err := read(); err != nil {
					return err
				}
				at = stored
				continue
			}
			return p.skipForeign(pr, c)
		}
		limit := p.batch
		if c.external() {
			// Each event is a call out: commit progress more often.
			limit = min(limit, externalBatch)
		}
		q := storage.FeedQuery{After: at, Limit: limit, AggregateType: c.feed, MaxBytes: p.store.readBytes}
		var page storage.FeedPage
		if ahead != nil && ahead.q == q {
			<-ahead.done
			page, err = ahead.page, ahead.err
		} else {
			page, err = readPage(ctx, q)
		}
		ahead.stop()
		ahead = nil
		if err == nil && (len(page.Events) == limit || page.Truncated) {
			// A full page: more is likely to follow. Read the next page
			// while this one is applied and committed; the next
			// iteration takes it if it asks for that page (a commit that
			// fails starts elsewhere).
			ahead = readAhead(ctx, readPage, storage.FeedQuery{After: page.Head, Limit: limit, AggregateType: c.feed,
				MaxBytes: p.store.readBytes})
		}
		if err != nil {
			return fmt.Errorf("projection %q: read feed: %w", name, err)
		}
		if len(page.Events) == 0 && unverified {
			unverified = false
			remembered := stored
			if err := read(); err != nil {
				return err
			}
			if stored != remembered {
				at = stored // reset or moved elsewhere: start from there
				continue
			}
		}
		if len(page.Events) > 0 {
			pctx, span := p.pageSpan(ctx, name, stored, page)
			commit, err := p.apply(pctx, pr, c, stored, page, gen)
			if err != nil {
				endPage(span, commit, err)
				return err
			}
			// Refused if the definition was replaced since rec was read.
			commit.Spec = pr.spec
			err = p.storage.CommitProjection(pctx, commit)
			endPage(span, commit, err)
			if !errors.Is(err, ErrConflict) {
				p.store.noteWrite(err)
			}
			pr.storedOK = false
			unverified = false
			if err != nil {
				pr.recent = nil
			}
			switch {
			case errors.Is(err, ErrConflict):
				// Another projector committed first, the definition
				// changed, or what this Projector remembered was stale:
				// start again from what is stored.
				if err := read(); err != nil {
					return err
				}
				at = stored
				continue
			case errors.Is(err, ErrNotFound):
				p.forget(name)
				return fmt.Errorf("projection %q: commit: %w", name, err)
			case err != nil:
				return fmt.Errorf("projection %q: commit: %w", name, err)
			}
			stored = page.Head
			pr.remember(stored, gen)
			pr.keepRecent(commit, gen)
			p.projected(name, len(page.Events), len(commit.Errors))
		}
		progressed := page.Head > at
		at = max(at, page.Head)
		if p.store.deleting.Load() == 0 && p.store.deletions.Load() == gen {
			pr.advance(at)
		}
		if at >= target && (!progressed || len(page.Events) < limit) {
			return nil
		}
		if !progressed {
			// target is saved but not yet visible in the feed (another
			// transaction below it is still in flight): wait for it;
			// unless the storage no longer holds it (it went back: see
			// rewind.go), which is asked once this has waited a while.
			if waited >= rewindWait && waited-checked >= rewindWait {
				checked = waited
				if target, err = p.rewindCheck(ctx, target); err != nil {
					return fmt.Errorf("projection %q: %w", name, err)
				}
				if at >= target {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("projection %q: %w", name, ctx.Err())
			case <-time.After(wait):
			}
			waited += wait
			wait = min(2*wait, 50*time.Millisecond)
		}
	}
}

// pageAhead is a feed page being read ahead of its catch-up.
type pageAhead struct {
	q      storage.FeedQuery
	done   chan struct{} // closed when page and err are set
	page   storage.FeedPage
	err    error
	cancel context.CancelFunc
}

// readAhead starts reading the page q selects with read.
func readAhead(ctx context.Context, read func(context.Context, storage.FeedQuery) (storage.FeedPage, error),
	q storage.FeedQuery) *pageAhead {
	ctx, cancel := context.WithCancel(ctx)
	a := &pageAhead{q: q, done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(a.done)
		a.page, a.err = read(ctx, q)
	}()
	return a
}

// stop ends the read of a (nil: none) and waits for it, so that no read
// outlives its catch-up.
func (a *pageAhead) stop() {
	if a != nil {
		a.cancel()
		<-a.done
	}
}

// rewindWait is how long a catch-up waits for a position this process was
// given before it asks whether the storage still holds it, and how often
// it asks again.
const rewindWait = 200 * time.Millisecond

// externalBatch bounds the page of a projection with external functions.
const externalBatch = 100

func (pr *proj) advance(to int64) {
	for {
		cur := pr.checkpoint.Load()
		if to <= cur || pr.checkpoint.CompareAndSwap(cur, to) {
			return
		}
	}
}

// apply computes the commit that moves the projection pr from checkpoint
// from over page, while the Store's deletion count is gen. The instances
// the page touches are taken from what pr committed last (proj.recent) or
// loaded in one call, changed as trees, and encoded once.
func (p *Projector) apply(ctx context.Context, pr *proj, c *compiled, from int64, page storage.FeedPage, gen int64) (storage.ProjectionCommit, error) {
	if c.code != nil {
		return p.applyCode(ctx, pr, c, from, page, gen)
	}
	name := pr.name
	commit := storage.ProjectionCommit{Name: name, From: from, To: page.Head, Indexed: len(c.indexed) > 0}
	type item struct {
		e  *Event
		h  *chandler
		id string
	}
	items := make([]item, 0, len(page.Events))
	var ids []string
	seen := make(map[string]bool)
	for i := range page.Events {
		e := &page.Events[i]
		h := c.handler(e)
		if h == nil {
			continue
		}
		id, err := instanceID(c, h, e)
		if err != nil {
			commit.Errors = append(commit.Errors, projectionError(e, "", err))
			continue
		}
		items = append(items, item{e, h, id})
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(items) == 0 {
		return commit, nil
	}
	insts := make(map[string]*lang.Instance, len(ids))
	load := ids
	if from == 0 {
		// At checkpoint 0 a projection has no instances (and the commit's
		// compare-and-set fails unless it is at 0).
		load = nil
	} else if pr.recent != nil && pr.recentAt == from && pr.recentGen == gen && p.store.deleting.Load() == 0 {
		load = nil
		for _, id := range ids {
			if st, ok := pr.recent[id]; ok {
				insts[id] = lang.StoredInstance(id, st)
			} else if !pr.recentAll {
				load = append(load, id)
			}
		}
	}
	for chunk := range slices.Chunk(load, 1000) {
		states, err := p.storage.LoadProjections(ctx, name, chunk)
		if err != nil {
			return storage.ProjectionCommit{}, fmt.Errorf("projection %q: load instances: %w", name, err)
		}
		for _, st := range states {
			insts[st.InstanceID] = lang.StoredInstance(st.InstanceID, st)
		}
	}
	order := make([]*lang.Instance, 0, len(ids))
	for _, id := range ids {
		in := insts[id]
		if in == nil {
			in = lang.NewInstance(id, storage.ProjectionState{Name: name, InstanceID: id})
			insts[id] = in
		}
		order = append(order, in)
	}
	var a lang.Applier
	for _, it := range items {
		in := insts[it.id]
		if it.h.uri != "" {
			// No storage connection is held here: the page was read and
			// the instances loaded, and the commit comes after.
			err := p.callFunction(ctx, c, it.h, it.e, in)
			if ctx.Err() != nil {
				return storage.ProjectionCommit{}, fmt.Errorf("projection %q: %w", name, ctx.Err())
			}
			if err != nil {
				commit.Errors = append(commit.Errors, projectionError(it.e, it.id, err))
			}
			continue
		}
		if err := a.Apply(in, it.e, it.h.ops, p.maxInstance); err != nil {
			commit.Errors = append(commit.Errors, projectionError(it.e, it.id, err))
		}
	}
	for _, in := range order {
		switch {
		case !in.Changed:
		case in.Deleted:
			if in.Stored {
				commit.Deletes = append(commit.Deletes, in.ID)
			}
		default:
			in.State.Data = in.Encode()
			in.State.SearchText = ""
			if len(c.indexed) > 0 {
				in.State.SearchText = in.SearchText(c.indexed)
			}
			commit.States = append(commit.States, in.State)
		}
	}
	return commit, nil
}

// instanceID returns the id of the instance event e changes.
func instanceID(c *compiled, h *chandler, e *Event) (string, error) {
	switch {
	case c.def.Aggregated:
		return "", nil
	case h.idField == nil:
		return e.AggregateID, nil
	}
	id, err := h.idField.ReadID(e.Data)
	if err != nil {
		return "", err
	}
	if msg := names.Problem(id); msg != "" {
		return "", fmt.Errorf("idField %s: the id %s", h.idField, msg)
	}
	return id, nil
}

// projectionError records that e could not be applied.
func projectionError(e *Event, id string, err error) ProjectionError {
	return ProjectionError{
		Position: e.Position, EventID: e.ID, EventType: e.Type,
		InstanceID: id, Message: sanitizeMessage(err.Error()),
	}
}
