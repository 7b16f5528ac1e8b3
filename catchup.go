package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// catchUp applies the feed to pr until the projection covers target and
// the feed shows nothing more. Only one goroutine of this Projector applies
// a given projection at a time; other processes are excluded by the
// checkpoint compare-and-set of CommitProjection.
func (p *Projector) catchUp(ctx context.Context, pr *proj, target int64) error {
	name := pr.c.def.Name
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.checkpoint.Load() >= target && target > 0 && p.running.Load() > 0 {
		return nil // applied while we waited for the lock
	}
	rec, err := p.storage.Definition(ctx, name)
	if err != nil {
		return fmt.Errorf("projection %q: %w", name, err)
	}
	stored := rec.Checkpoint // what the storage has committed
	at := stored             // how far this call has verified the feed
	wait := time.Millisecond
	for {
		page, err := p.storage.ReadFeed(ctx, FeedQuery{After: at, Limit: p.batch, AggregateType: pr.c.def.Feed})
		if err != nil {
			return fmt.Errorf("projection %q: read feed: %w", name, err)
		}
		if len(page.Events) > 0 {
			commit, err := p.apply(ctx, pr.c, stored, page)
			if err != nil {
				return err
			}
			err = p.storage.CommitProjection(ctx, commit)
			switch {
			case errors.Is(err, ErrConflict):
				// Another projector committed first: start again from its
				// checkpoint.
				rec, err := p.storage.Definition(ctx, name)
				if err != nil {
					return fmt.Errorf("projection %q: %w", name, err)
				}
				stored, at = rec.Checkpoint, rec.Checkpoint
				continue
			case err != nil:
				return fmt.Errorf("projection %q: commit: %w", name, err)
			}
			stored = page.Head
		}
		progressed := page.Head > at
		at = max(at, page.Head)
		pr.advance(at)
		if at >= target && (!progressed || len(page.Events) < p.batch) {
			return nil
		}
		if !progressed {
			// target is saved but not yet visible in the feed (another
			// transaction below it is still in flight): wait for it.
			select {
			case <-ctx.Done():
				return fmt.Errorf("projection %q: %w", name, ctx.Err())
			case <-time.After(wait):
			}
			wait = min(2*wait, 50*time.Millisecond)
		}
	}
}

func (pr *proj) advance(to int64) {
	for {
		cur := pr.checkpoint.Load()
		if to <= cur || pr.checkpoint.CompareAndSwap(cur, to) {
			return
		}
	}
}

// instance is a projection instance being changed by a page of events.
type instance struct {
	state   ProjectionState
	changed bool
}

// apply computes the commit that moves the projection from checkpoint from
// over page.
func (p *Projector) apply(ctx context.Context, c *compiled, from int64, page FeedPage) (ProjectionCommit, error) {
	name := c.def.Name
	commit := ProjectionCommit{Name: name, From: from, To: page.Head}
	insts := make(map[string]*instance)
	var order []*instance
	for _, e := range page.Events {
		ops, ok := c.handlers[e.Type]
		if !ok {
			continue
		}
		id := e.AggregateID
		if c.def.Aggregated {
			id = ""
		}
		in := insts[id]
		if in == nil {
			st, err := p.storage.LoadProjection(ctx, name, id)
			switch {
			case errors.Is(err, ErrNotFound):
				st = ProjectionState{Name: name, InstanceID: id, Data: emptyObject}
			case err != nil:
				return ProjectionCommit{}, fmt.Errorf("projection %q: load %q: %w", name, id, err)
			}
			in = &instance{state: st}
			insts[id] = in
			order = append(order, in)
		}
		data, err := applyOps(in.state.Data, ops, e.Data)
		if err != nil {
			commit.Errors = append(commit.Errors, ProjectionError{
				Position: e.Position, EventID: e.ID, EventType: e.Type,
				InstanceID: id, Message: sanitizeMessage(err.Error()),
			})
			continue
		}
		in.state.Data = data
		in.state.Position = e.Position
		in.state.UpdatedAt = e.RecordedAt
		in.changed = true
	}
	for _, in := range order {
		if in.changed {
			commit.States = append(commit.States, in.state)
		}
	}
	return commit, nil
}
