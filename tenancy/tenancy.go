// Package tenancy gives each tenant of a project its own eventstore.Store
// and Projector, obtained by tenant id from one Set, so that a program gets
// isolation by construction: a tenant's Store reads and writes only that
// tenant's storage, and no query can forget a tenant condition.
//
// A Set keeps a registry of its tenants (id, number, reference, when added,
// whether deleted) as events in a storage of its own, Options.Registry, so
// it survives a restart; Sets in several processes may share one registry
// (servers on one database): a Set reads it again for an id it does not
// know, and at most every second otherwise, and closes the tenants another
// process deleted. Each tenant's data lives in a separate storage
// that Options.Open opens (creating it when missing): a memory store, a
// SQLite file or a PostgreSQL schema per tenant. A tenant's storage is
// opened on first use and kept open until the tenant is deleted or the Set
// closed; each open tenant holds its storage and a running Projector.
// Deleting a tenant closes its storage and has Options.Remove delete it
// (remove the file, drop the schema): nothing of it stays readable and its
// space is given back.
//
// Projection definitions are shared: those of Options.Definitions, the
// project's Projector, are put into every tenant's Projector when the
// tenant is opened, and DefinitionChanged passes a later change on to every
// open tenant at once. A change that another process made to the project's
// definitions (servers sharing one database) reaches this process's open
// tenants within a second: a Set reads the project's definitions
// once a second while it has open tenants, and brings those of every open
// tenant up to date when they changed. Each tenant's projections see only
// their own events. With Options.Reactions, reaction definitions are
// shared the same way, and each open tenant runs a reactions Engine of
// its own, so that a tenant's events schedule reactions of that tenant
// only (OpenReactions).
package tenancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
)

// DefaultMaxTenants is the Options.MaxTenants used when it is zero.
const DefaultMaxTenants = 1000

// registryType is the aggregate type of the registry's events; the
// aggregate id is the tenant id.
const registryType = "tenant"

// Event types of the registry.
const (
	evAdded   = "TenantAdded"
	evUpdated = "TenantUpdated"
	evDeleted = "TenantDeleted"
)

// ErrUnknownTenant is returned (wrapped) for a tenant id that was never
// added or was deleted.
var ErrUnknownTenant = errors.New("unknown tenant")

// ErrTooManyTenants is returned (wrapped) by Add when the Set holds
// Options.MaxTenants live tenants, or ten times as many with the deleted
// ones.
var ErrTooManyTenants = errors.New("too many tenants")

// ErrTenantDeleted is returned (wrapped) by Add for the id of a deleted
// tenant: ids are not reused.
var ErrTenantDeleted = errors.New("tenant deleted")

// Tenant is one tenant of a Set.
type Tenant struct {
	// ID is the tenant's UUID, in lower case.
	ID string
	// Number is the tenant's number in the Set: the registry position of
	// its addition, so increasing in the order tenants were added and
	// unique even when several processes share the registry, but not
	// contiguous.
	Number int64
	// AddedAt is when the tenant was added.
	AddedAt time.Time
	// Reference is the caller's name for the tenant; it may be empty.
	Reference string
	// Deleted reports that the tenant was deleted with its data.
	Deleted bool
}

// Options configures a Set. Registry, Open and Definitions are required.
type Options struct {
	// Registry is the storage of the tenant registry. The Set owns it and
	// closes it in Close. It must not be the storage of a tenant or of the
	// project's data.
	Registry storage.Storage
	// Open opens the storage of tenant id, creating it when missing. The
	// Set owns what it returns.
	Open func(ctx context.Context, id string) (storage.Storage, error)
	// Remove deletes the storage of tenant id once the Set has closed it;
	// it must succeed when there is nothing to delete. Nil does nothing
	// (memory storages are dropped with their Store).
	Remove func(ctx context.Context, id string) error
	// Definitions is the Projector whose definitions every tenant shares.
	Definitions *eventstore.Projector
	// Reactions, when set, is the project's reactions Engine, whose
	// definitions every tenant shares as it shares projection definitions:
	// each open tenant gets an Engine of its own on its Store and storage
	// (Reactions.ForTenant), which runs while the project has a reaction
	// definition, so that each tenant's events schedule reactions in that
	// tenant's storage only. OpenReactions returns a tenant's Engine.
	Reactions *reactions.Engine
	// Store configures each tenant's Store (nil: defaults).
	Store *eventstore.Options
	// Projector configures each tenant's Projector (nil: defaults).
	Projector *eventstore.ProjectorOptions
	// MaxTenants bounds the live tenants; zero means DefaultMaxTenants.
	MaxTenants int
	// Logger receives the errors of tenants' projectors; the default
	// discards them.
	Logger *slog.Logger
	// Deleted, when set, is called with the id of a tenant once it is
	// deleted, by Delete or by another process sharing the registry (seen
	// when the registry is read again), so that what the caller keeps per
	// tenant (metrics series) can go. It is called with the Set's lock
	// held: it must not call the Set.
	Deleted func(id string)
}

// Set is the tenants of one project. Its methods are safe for concurrent
// use.
type Set struct {
	opts Options
	reg  *eventstore.Store
	log  *slog.Logger
	ctx  context.Context // parent of the tenants' projectors
	stop context.CancelFunc

	// defsMu orders the changes of open tenants' definitions: those of
	// DefinitionChanged and those of followDefinitions. Taken before mu.
	defsMu sync.Mutex

	mu        sync.Mutex // guards the fields below; held while a tenant opens
	byID      map[string]*entry
	order     []*entry
	live      int
	closed    bool
	cursor    int64          // of the registry's feed, read up to here
	refreshed time.Time      // when the registry was last read
	running   sync.WaitGroup // the tenants' projectors, and closes of tenants deleted elsewhere
}

// refreshEvery is how often a Set reads the registry for the changes of
// other processes (servers sharing one database) when serving a tenant it
// knows; an unknown id is looked up at once.
const refreshEvery = time.Second

// entry is one tenant of the registry and, while open, its data.
type entry struct {
	t       Tenant
	version int64 // of its registry aggregate
	open    *instance
}

// instance is an open tenant's Store and Projector.
type instance struct {
	st   *eventstore.Store
	p    *eventstore.Projector
	stop context.CancelFunc
	done chan struct{}
	ctx  context.Context // of the projector and the reactions Engine; stop cancels it
	// defs is the fingerprint of the project's definitions the tenant's
	// were last made equal to (definitions.print). Guarded by Set.mu.
	defs string
	// r is the tenant's reactions Engine (nil without Options.Reactions);
	// while it runs, rstop stops it and rdone is closed when it has. They
	// change under Set.defsMu with inflight held (applyDefinitions).
	r     *reactions.Engine
	rstop context.CancelFunc
	rdone chan struct{}
	// inflight is held for reading by every user of the instance; it is
	// taken for writing before the instance is closed.
	inflight sync.RWMutex
}

// New reads the registry and returns the Set. Tenants are opened on first
// use. The storage of a deleted tenant is removed again (Options.Remove),
// in case a crash interrupted its deletion.
func New(ctx context.Context, opts Options) (*Set, error) {
	if opts.Registry == nil || opts.Open == nil || opts.Definitions == nil {
		return nil, errors.New("tenancy: Options.Registry, Open and Definitions are required")
	}
	if opts.MaxTenants <= 0 {
		opts.MaxTenants = DefaultMaxTenants
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg, err := eventstore.New(opts.Registry, nil)
	if err != nil {
		return nil, err
	}
	if opts.Projector == nil || *hooks.DefinitionsPoll(opts.Projector) == 0 {
		// The Set passes definition changes on (definitionsEvery): the
		// tenants' Projectors need not list their definitions at every
		// wake-up, about one a save when saves go round many tenants.
		po := eventstore.ProjectorOptions{}
		if opts.Projector != nil {
			po = *opts.Projector
		}
		*hooks.DefinitionsPoll(&po) = tenantDefinitionsPoll
		opts.Projector = &po
	}
	s := &Set{opts: opts, reg: reg, log: log, byID: map[string]*entry{}}
	s.ctx, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	if err := s.refresh(ctx); err != nil {
		_ = reg.Close()
		return nil, fmt.Errorf("tenancy: read the registry: %w", err)
	}
	for _, e := range s.order {
		if e.t.Deleted && opts.Remove != nil {
			if err := opts.Remove(ctx, e.t.ID); err != nil {
				_ = reg.Close()
				return nil, fmt.Errorf("tenancy: remove the storage of deleted tenant %s: %w", e.t.ID, err)
			}
		}
	}
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		s.followDefinitions()
	}()
	return s, nil
}

// registryEvent is the data of a registry event.
type registryEvent struct {
	AddedAt   int64  `json:"addedAt,omitempty"` // Unix milliseconds
	Reference string `json:"reference"`
}

// refresh folds the registry's feed, from where it was last read, into s;
// s.mu is held (or s is not shared yet). A tenant that another process
// deleted is closed here.
func (s *Set) refresh(ctx context.Context) error {
	added := false
	for {
		res, err := s.reg.ReadFeed(ctx, registryType, s.cursor, &eventstore.FeedOptions{Limit: limits.MaxFeedLimit})
		if errors.Is(err, eventstore.ErrNotFound) {
			break
		}
		if err != nil {
			return err
		}
		for _, fe := range res.Entries {
			for _, ev := range fe.Events {
				var d registryEvent
				if len(ev.Data) > 0 {
					if err := json.Unmarshal(ev.Data, &d); err != nil {
						return fmt.Errorf("event %s: %w", ev.ID, err)
					}
				}
				e := s.byID[fe.AggregateID]
				switch {
				case ev.Type == evAdded && e == nil:
					e = &entry{t: Tenant{ID: fe.AggregateID, Number: ev.Position, AddedAt: time.UnixMilli(d.AddedAt).UTC(), Reference: d.Reference}}
					s.byID[e.t.ID] = e
					s.order = append(s.order, e)
					s.live++
					added = true
				case e == nil:
					return fmt.Errorf("event %s (%s) of tenant %s before it was added", ev.ID, ev.Type, fe.AggregateID)
				case ev.Type == evUpdated:
					e.t.Reference = d.Reference
				case ev.Type == evDeleted && !e.t.Deleted:
					e.t.Deleted = true
					s.live--
					if s.opts.Deleted != nil {
						s.opts.Deleted(e.t.ID)
					}
					if in := e.open; in != nil {
						e.open = nil
						s.running.Add(1)
						go func() {
							defer s.running.Done()
							s.closeInstance(in)
						}()
					}
				}
				e.version = max(e.version, fe.Version)
			}
		}
		s.cursor = max(s.cursor, res.Next)
		if !res.HasMore {
			break
		}
	}
	s.refreshed = time.Now()
	if added {
		sort.Slice(s.order, func(i, j int) bool { return s.order[i].t.Number < s.order[j].t.Number })
	}
	return nil
}

// record saves one registry event of tenant e at its next version and
// returns its position.
func (s *Set) record(ctx context.Context, e *entry, typ string, d registryEvent) (int64, error) {
	data, err := json.Marshal(d)
	if err != nil {
		return 0, err
	}
	res, err := s.reg.Save(ctx, registryType, e.t.ID, []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: typ, Data: data}},
		&eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(e.version)})
	if err != nil {
		return 0, fmt.Errorf("tenancy: record %s of tenant %s: %w", typ, e.t.ID, err)
	}
	e.version = res.Version
	return res.Position, nil
}

// errClosed is returned after Close.
var errClosed = fmt.Errorf("tenancy: the set is closed: %w", eventstore.ErrClosed)

// Add adds tenant id (a UUID, lower case) with reference. created is false
// when the tenant exists; nothing changes then. The tenant's storage is
// created on first use.
func (s *Set) Add(ctx context.Context, id, reference string) (created bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false, errClosed
	}
	if err := s.refresh(ctx); err != nil {
		return false, err
	}
	if e, ok := s.byID[id]; ok {
		if e.t.Deleted {
			return false, fmt.Errorf("tenant %s: %w", id, ErrTenantDeleted)
		}
		return false, nil
	}
	switch {
	case s.live >= s.opts.MaxTenants:
		return false, fmt.Errorf("the project holds the maximum of %d tenants: %w", s.opts.MaxTenants, ErrTooManyTenants)
	case len(s.order) >= 10*s.opts.MaxTenants:
		return false, fmt.Errorf("the project has had the maximum of %d tenants, deleted ones included: %w", 10*s.opts.MaxTenants, ErrTooManyTenants)
	}
	e := &entry{t: Tenant{ID: id, AddedAt: time.Now().UTC().Truncate(time.Millisecond), Reference: reference}}
	pos, err := s.record(ctx, e, evAdded, registryEvent{AddedAt: e.t.AddedAt.UnixMilli(), Reference: reference})
	if errors.Is(err, eventstore.ErrConflict) {
		// Another process added it just now.
		if err := s.refresh(ctx); err != nil {
			return false, err
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	e.t.Number = pos
	s.byID[id] = e
	s.order = append(s.order, e)
	s.live++
	return true, nil
}

// List returns every tenant, the deleted ones included, by number.
func (s *Set) List(ctx context.Context) ([]Tenant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if err := s.refresh(ctx); err != nil {
		return nil, err
	}
	out := make([]Tenant, len(s.order))
	for i, e := range s.order {
		out[i] = e.t
	}
	return out, nil
}

// liveEntry returns the entry of a live tenant id; s.mu is held. It reads
// the registry first when fresh is set, when it last did more than
// refreshEvery ago, or when it does not know id.
func (s *Set) liveEntry(ctx context.Context, id string, fresh bool) (*entry, error) {
	if s.closed {
		return nil, errClosed
	}
	e, ok := s.byID[id]
	if fresh || !ok || time.Since(s.refreshed) > refreshEvery {
		if err := s.refresh(ctx); err != nil {
			return nil, err
		}
		e, ok = s.byID[id]
	}
	if !ok || e.t.Deleted {
		return nil, fmt.Errorf("tenant %s: %w", id, ErrUnknownTenant)
	}
	return e, nil
}

// Update sets the reference of tenant id.
func (s *Set) Update(ctx context.Context, id, reference string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.liveEntry(ctx, id, true)
	if err != nil {
		return err
	}
	if e.t.Reference == reference {
		return nil
	}
	if _, err := s.record(ctx, e, evUpdated, registryEvent{Reference: reference}); err != nil {
		return err
	}
	e.t.Reference = reference
	return nil
}

// Open returns the Store and Projector of tenant id, opening its storage
// on first use. Call release once done with them: Delete and Close wait for
// it. A deleted or unknown tenant is an error wrapping ErrUnknownTenant.
func (s *Set) Open(ctx context.Context, id string) (st *eventstore.Store, p *eventstore.Projector, release func(), err error) {
	in, err := s.hold(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	return in.st, in.p, in.inflight.RUnlock, nil
}

// hold returns the open instance of tenant id, opening it first if need
// be, held for reading (in.inflight) until the caller releases it.
func (s *Set) hold(ctx context.Context, id string) (*instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.liveEntry(ctx, id, false)
	if err != nil {
		return nil, err
	}
	if e.open == nil {
		if e.open, err = s.openTenant(ctx, id); err != nil {
			return nil, err
		}
	}
	e.open.inflight.RLock()
	return e.open, nil
}

// OpenReactions returns the reactions Engine of tenant id, opening its
// storage on first use, with release, as Open does: its reactions are the
// tenant's, its definitions the project's (change them through
// Options.Reactions and call ReactionDefinitionsChanged; one changed
// through a tenant's Engine is put back when the project's definitions
// next change or the tenant is next opened). It
// fails when the Set has no Options.Reactions (or the tenant's storage
// cannot keep reactions), and with ErrUnknownTenant as Open does.
func (s *Set) OpenReactions(ctx context.Context, id string) (*reactions.Engine, func(), error) {
	if s.opts.Reactions == nil {
		return nil, nil, fmt.Errorf("tenancy: tenant %s: %w", id, reactions.ErrUnsupported)
	}
	in, err := s.hold(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if in.r == nil {
		in.inflight.RUnlock()
		return nil, nil, fmt.Errorf("tenancy: tenant %s: %w", id, reactions.ErrUnsupported)
	}
	return in.r, in.inflight.RUnlock, nil
}

// openTenant opens the storage of tenant id, puts the shared definitions
// into its Projector and starts it; s.mu is held.
func (s *Set) openTenant(ctx context.Context, id string) (*instance, error) {
	stg, err := s.opts.Open(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("tenancy: open the storage of tenant %s: %w", id, err)
	}
	st, err := eventstore.New(stg, s.opts.Store)
	if err != nil {
		_ = stg.Close()
		return nil, err
	}
	p := eventstore.NewProjector(st, s.opts.Projector)
	pctx, stop := context.WithCancel(s.ctx)
	in := &instance{st: st, p: p, ctx: pctx, stop: stop, done: make(chan struct{})}
	fail := func(err error) (*instance, error) {
		stop()
		if in.rdone != nil {
			<-in.rdone
		}
		_ = st.Close()
		return nil, fmt.Errorf("tenancy: tenant %s: %w", id, err)
	}
	if s.opts.Reactions != nil {
		switch in.r, err = s.opts.Reactions.ForTenant(st, stg, id); {
		case errors.Is(err, reactions.ErrUnsupported):
			s.log.Warn("tenancy: the tenant's storage cannot keep reactions; its events schedule none", "tenant", id)
		case err != nil:
			return fail(err)
		}
	}
	pd, err := s.projectDefinitions(ctx)
	if err == nil {
		err = s.applyDefinitions(ctx, in, pd)
	}
	if err != nil {
		return fail(err)
	}
	in.defs = pd.print
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		defer close(in.done)
		if err := p.Run(pctx); err != nil && pctx.Err() == nil {
			s.log.Error("tenant projector stopped", "tenant", id, "err", err)
		}
	}()
	return in, nil
}

// Delete deletes tenant id: it is marked deleted in the registry at once,
// so that no request reaches its data any more, then its storage is closed
// once its users have released it, and removed.
func (s *Set) Delete(ctx context.Context, id string) error {
	s.mu.Lock()
	e, err := s.liveEntry(ctx, id, true)
	if err == nil {
		_, err = s.record(ctx, e, evDeleted, registryEvent{})
	}
	if err != nil {
		s.mu.Unlock()
		return err
	}
	e.t.Deleted = true
	s.live--
	in := e.open
	e.open = nil
	if s.opts.Deleted != nil {
		s.opts.Deleted(id)
	}
	s.mu.Unlock()
	if in != nil {
		s.closeInstance(in)
	}
	if s.opts.Remove != nil {
		if err := s.opts.Remove(ctx, id); err != nil {
			return fmt.Errorf("tenancy: remove the storage of tenant %s (removed again at the next start): %w", id, err)
		}
	}
	return nil
}

// EachOpen calls fn with the id and Projector of every tenant whose
// storage is open now, in the order they were added; tenants not opened
// since the start (no request since) are left out, and none is opened.
// fn runs without the Set's lock, while the tenant cannot be closed: a
// Delete of it waits for fn to return.
func (s *Set) EachOpen(fn func(id string, p *eventstore.Projector)) {
	type open struct {
		id string
		in *instance
	}
	s.mu.Lock()
	var ins []open
	for _, e := range s.order {
		if e.open != nil {
			// Instances are detached (e.open = nil) under s.mu before
			// they are closed, so this read lock never waits.
			e.open.inflight.RLock()
			ins = append(ins, open{e.t.ID, e.open})
		}
	}
	s.mu.Unlock()
	done := 0
	defer func() { // also when fn panics
		for _, o := range ins[done:] {
			o.in.inflight.RUnlock()
		}
	}()
	for _, o := range ins {
		fn(o.id, o.in.p)
		o.in.inflight.RUnlock()
		done++
	}
}

// closeInstance waits for in's users, stops its projector and closes its
// Store.
func (s *Set) closeInstance(in *instance) {
	in.inflight.Lock()
	defer in.inflight.Unlock()
	in.stop()
	<-in.done
	if in.rdone != nil {
		<-in.rdone
	}
	if err := in.st.Close(); err != nil {
		s.log.Error("close tenant storage", "err", err)
	}
}

// Close closes every open tenant, after its users released it, and the
// registry. Calls after the first do nothing.
func (s *Set) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var open []*instance
	for _, e := range s.order {
		if e.open != nil {
			open = append(open, e.open)
			e.open = nil
		}
	}
	s.mu.Unlock()
	for _, in := range open {
		s.closeInstance(in)
	}
	s.stop()
	s.running.Wait()
	return s.reg.Close()
}
