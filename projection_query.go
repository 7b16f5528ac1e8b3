package eventstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/names"
	"github.com/eventkit-go/eventstore/storage"
)

// Single returns the instance id (the aggregate id or IDField value) of
// the single projection name, or ErrNotFound.
func (p *Projector) Single(ctx context.Context, name, id string) (Projection, error) {
	if msg := names.Problem(id); msg != "" {
		return Projection{}, &ValidationError{Op: "projection", Fields: []FieldError{{Field: "projectionId", Message: msg}}}
	}
	return p.query(ctx, name, id, false)
}

// AwaitSingle is Single that waits for the instance until ctx is done.
func (p *Projector) AwaitSingle(ctx context.Context, name, id string) (Projection, error) {
	for {
		changed := p.store.watch()
		pj, err := p.Single(ctx, name, id)
		if err == nil || !errors.Is(err, ErrNotFound) {
			return pj, err
		}
		if _, lerr := p.lookup(ctx, name); lerr != nil {
			return Projection{}, lerr // the projection itself is unknown
		}
		t := time.NewTimer(p.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return Projection{}, err
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// Aggregated returns the aggregated projection name, or ErrNotFound (also
// before its first event).
func (p *Projector) Aggregated(ctx context.Context, name string) (Projection, error) {
	return p.query(ctx, name, "", true)
}

func (p *Projector) query(ctx context.Context, name, instance string, aggregated bool) (Projection, error) {
	pr, err := p.kind(ctx, name, aggregated)
	if err != nil {
		return Projection{}, err
	}
	if err := p.sync(ctx, pr); err != nil {
		return Projection{}, err
	}
	st, err := p.storage.LoadProjection(ctx, name, instance)
	if err != nil {
		if aggregated {
			return Projection{}, wrapNotFound(fmt.Sprintf("projection %q has no events yet", name), err)
		}
		return Projection{}, wrapNotFound(fmt.Sprintf("projection %q has no instance %q", name, instance), err)
	}
	return toProjection(name, st, aggregated), nil
}

// kind looks name up and checks it is of the kind asked for.
func (p *Projector) kind(ctx context.Context, name string, aggregated bool) (*proj, error) {
	pr, err := p.lookup(ctx, name)
	if err != nil {
		return nil, err
	}
	if a := pr.c.Load().def.Aggregated; a != aggregated {
		k := "a single"
		if a {
			k = "an aggregated"
		}
		return nil, fmt.Errorf("projection %q is %s projection: %w", name, k, ErrNotFound)
	}
	return pr, nil
}

func toProjection(name string, st storage.ProjectionState, aggregated bool) Projection {
	id := st.InstanceID
	if aggregated {
		id = name
	}
	return Projection{
		Name: name, ID: id, Aggregated: aggregated, Data: st.Data,
		CreatedAt: st.CreatedAt, UpdatedAt: st.UpdatedAt, Reference: st.Reference, Position: st.Position,
	}
}

// ListOptions select, order and page the instances of Projector.List; the
// zero value lists the first 100 by id.
type ListOptions struct {
	Skip, Limit int // Limit 0 means 100, at most 1000
	Sort        ProjectionSort
	Descending  bool
	// Reference, when its Kind is set, keeps the instances with that
	// reference; RefFrom and RefTo, when set, an inclusive range of them.
	Reference, RefFrom, RefTo Reference
	IDs                       []string // when not empty, only these instances
	// Search keeps the instances in which each of its words starts a word
	// of an IndexedField, ignoring case (docs/projections.md).
	Search string
}

// Limits of ListOptions (the others are in internal/limits).
const (
	maxListIDs  = 1000
	maxListSkip = 1 << 30
)

// ProjectionPage is one page of Projector.List.
type ProjectionPage struct {
	Projections []Projection // in order
	Total       int64        // every matching instance
	HasMore     bool         // instances follow this page
}

// List returns the instances of the single projection name that opts
// selects.
func (p *Projector) List(ctx context.Context, name string, opts ListOptions) (ProjectionPage, error) {
	q, err := listQuery(name, opts)
	if err != nil {
		return ProjectionPage{}, err
	}
	pr, err := p.kind(ctx, name, false)
	if err != nil {
		return ProjectionPage{}, err
	}
	if len(q.Search) > 0 && len(pr.c.Load().indexed) == 0 {
		return ProjectionPage{}, &ValidationError{Op: "list projections", Fields: []FieldError{{Field: "search",
			Message: fmt.Sprintf("projection %q has no indexedFields to search", name)}}}
	}
	if err := p.sync(ctx, pr); err != nil {
		return ProjectionPage{}, err
	}
	list, err := p.storage.ListProjections(ctx, q)
	if err != nil {
		return ProjectionPage{}, fmt.Errorf("projection %q: list: %w", name, err)
	}
	page := ProjectionPage{Projections: make([]Projection, len(list.States)), Total: list.Total}
	for i, st := range list.States {
		page.Projections[i] = toProjection(name, st, false)
	}
	page.HasMore = int64(q.Skip+len(list.States)) < list.Total
	return page, nil
}

// Count returns how many instances the single projection name has, with
// reference ref when ref.Kind is set.
func (p *Projector) Count(ctx context.Context, name string, ref Reference) (int64, error) {
	pr, err := p.kind(ctx, name, false)
	if err != nil {
		return 0, err
	}
	if err := p.sync(ctx, pr); err != nil {
		return 0, err
	}
	list, err := p.storage.ListProjections(ctx, storage.ProjectionQuery{Name: name, Reference: ref})
	if err != nil {
		return 0, fmt.Errorf("projection %q: count: %w", name, err)
	}
	return list.Total, nil
}

func listQuery(name string, o ListOptions) (storage.ProjectionQuery, error) {
	v := validation{op: "list projections"}
	if msg := names.Problem(name); msg != "" {
		v.add("projectionName", "%s", msg)
	}
	switch {
	case o.Limit < 0 || o.Limit > limits.MaxListLimit:
		v.add("limit", "must be between 1 and %d", limits.MaxListLimit)
	case o.Limit == 0:
		o.Limit = limits.DefaultListLimit
	}
	if o.Skip < 0 || o.Skip > maxListSkip {
		v.add("skip", "must be between 0 and %d", maxListSkip)
	}
	if o.Sort > SortByUpdatedAt {
		v.add("sort", "is not a known order")
	}
	if len(o.IDs) > maxListIDs {
		v.add("id", "at most %d ids are allowed", maxListIDs)
	}
	for i, id := range o.IDs {
		if msg := names.Problem(id); msg != "" {
			v.add(fmt.Sprintf("id[%d]", i), "%s", msg)
		}
	}
	search := searchWords(&v, o.Search)
	if err := v.err(); err != nil {
		return storage.ProjectionQuery{}, err
	}
	return storage.ProjectionQuery{
		Name: name, IDs: o.IDs, Reference: o.Reference, From: o.RefFrom, To: o.RefTo, Search: search,
		Sort: o.Sort, Descending: o.Descending, Skip: o.Skip, Limit: o.Limit,
	}, nil
}

// CatchUp brings the projections named, or every one (side by side, so
// that a slow one holds no other back), up to date with this process's
// saves, and builds their replacements (Put), which then take over.
// Queries catch up by themselves; CatchUp waits for a replacement.
func (p *Projector) CatchUp(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return p.catchUpAll(ctx, nil)
	}
	var errs []error
	for _, name := range names {
		if err := p.catchUpNamed(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// catchUpNamed is CatchUp of one projection.
func (p *Projector) catchUpNamed(ctx context.Context, name string) error {
	pr, err := p.lookup(ctx, name)
	if err != nil {
		return err
	}
	if err := p.sync(ctx, pr); err != nil {
		return err
	}
	if _, err := p.storage.Definition(ctx, name+replacementSuffix); err == nil {
		return p.catchUpStored(ctx, name+replacementSuffix, nil)
	}
	return nil
}

// sync applies the feed to pr. When Run is keeping projections current and
// pr already covers this process's saves, it returns at once. When the
// storage is out of space, so that nothing can be applied, queries answer
// from what the projection holds: sync logs the error and returns nil.
func (p *Projector) sync(ctx context.Context, pr *proj) error {
	target := p.store.lastPos.Load()
	if p.running.Load() > 0 && target > 0 && pr.checkpoint.Load() >= target {
		return nil
	}
	err := p.catchUp(ctx, pr, target, nil)
	if errors.Is(err, errForeignCode) {
		return nil // applied by the processes that register it; answer from what they committed
	}
	if errors.Is(err, ErrFull) {
		p.log.Warn("eventstore: the storage is out of space; answering from the projection as it is", "projection", pr.name, "err", err)
		return nil
	}
	return err
}

// Run keeps every projection current and builds replacements until ctx
// is done or the Store closed, logging and retrying errors; it then
// returns nil. Run is optional: queries catch up by themselves.
func (p *Projector) Run(ctx context.Context) error {
	defer p.store.addProjector(p)() // deletions reach it (projection_forget.go)
	// A deletion before this point did not reach p: forget how far p knew
	// its projections were applied, so that the next query of each
	// catches up from the storage (sync trusts p's own record only while
	// Run runs). Only then does Run count as running.
	p.forgetCheckpoints()
	p.running.Add(1)
	defer p.running.Add(-1)
	var apart sync.WaitGroup
	defer apart.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before the Wait: ends the projections caught up apart
	for {
		changed := p.store.watch()
		if p.store.closed.Load() || ctx.Err() != nil {
			return nil
		}
		if err := p.catchUpAll(ctx, &apart); err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
			p.log.Warn("eventstore: projector", "err", err)
		}
		// Saves through this Store, the Storage's AppendWatcher and Close
		// close changed; PollInterval is only the fallback (wake.go).
		if !p.store.waitChange(ctx, changed, p.kick, p.poll, time.Time{}) {
			return nil
		}
	}
}

// catchUpAll is CatchUp of every projection; with apart not nil, projections with external
// functions are caught up by goroutines of their own, added to apart,
// that it does not wait for (catchUpApart).
func (p *Projector) catchUpAll(ctx context.Context, apart *sync.WaitGroup) error {
	names, err := p.definitionNames(ctx, apart != nil)
	if err != nil {
		return fmt.Errorf("projections: %w", err)
	}
	cache := newPageCache(p.storage, p.store.deletions.Load)
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	one := func(name string) {
		if apart != nil && p.catchUpApart(ctx, name, apart) {
			return
		}
		if err := p.catchUpStored(ctx, name, cache); err != nil && !errors.Is(err, ErrNotFound) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	if len(names) == 1 {
		// No goroutine for a lone projection: an idle Projector wakes
		// once a poll interval, and a thousand tenants' do.
		one(names[0])
		return errors.Join(errs...)
	}
	queue := make(chan string)
	for range min(catchUpWorkers, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range queue {
				one(name)
			}
		}()
	}
	for _, name := range names {
		select {
		case queue <- name:
		case <-ctx.Done():
		}
	}
	close(queue)
	wg.Wait()
	return errors.Join(errs...)
}

// definitionNames returns the names of the stored definitions: for Run
// (reuse), those it listed last if that was less than p.relist
// ago and no definition changed in this process since.
func (p *Projector) definitionNames(ctx context.Context, reuse bool) ([]string, error) {
	p.mu.Lock()
	names, at, fresh, changes := p.listed, p.listedAt, p.listedAs == p.changes, p.changes
	p.mu.Unlock()
	if reuse && names != nil && fresh && time.Since(at) < p.relist {
		return names, nil
	}
	at = time.Now()
	recs, err := p.storage.Definitions(ctx)
	if err != nil {
		return nil, err
	}
	names = make([]string, len(recs))
	for i, rec := range recs {
		names[i] = rec.Name
	}
	p.mu.Lock()
	p.listed, p.listedAt, p.listedAs = names, at, changes
	p.mu.Unlock()
	return names, nil
}

// catchUpWorkers is how many projections CatchUp applies at once.
const catchUpWorkers = 4

// catchUpStored catches up the stored definition of that name; for a
// replacement, it then swaps it in.
func (p *Projector) catchUpStored(ctx context.Context, storeName string, cache *pageCache) error {
	pr, err := p.lookupStored(ctx, storeName)
	if err != nil {
		return err
	}
	if err := p.catchUp(ctx, pr, p.store.lastPos.Load(), cache); err != nil {
		if errors.Is(err, errForeignCode) {
			return nil // not applied here, never swapped in by this process
		}
		return err
	}
	name, ok := strings.CutSuffix(storeName, replacementSuffix)
	if !ok {
		return nil
	}
	// Hold the current definition's lock so no apply of it in this process
	// is in flight across the swap.
	if cur, err := p.lookupStored(ctx, name); err == nil {
		cur.mu.Lock()
		defer cur.mu.Unlock()
	}
	if err := p.storage.RenameProjection(ctx, storeName, name); err != nil {
		return fmt.Errorf("projection %q: swap in the replacement: %w", name, err)
	}
	p.forget(storeName)
	p.forget(name)
	p.log.Info("eventstore: projection replaced", "projection", name)
	return nil
}
