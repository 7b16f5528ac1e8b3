package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ProjectorOptions configures a Projector. A nil *ProjectorOptions means all
// defaults.
type ProjectorOptions struct {
	// BatchSize is how many feed events are applied per storage commit.
	// The default is 500.
	BatchSize int
	// PollInterval is how often Run looks for events saved by other
	// processes sharing the storage. Saves through this process's Store
	// wake it at once. The default is one second.
	PollInterval time.Duration
}

func (o *ProjectorOptions) batchSize() int {
	if o == nil || o.BatchSize <= 0 {
		return 500
	}
	return o.BatchSize
}

func (o *ProjectorOptions) pollInterval() time.Duration {
	if o == nil || o.PollInterval <= 0 {
		return time.Second
	}
	return o.PollInterval
}

// Projector creates projection definitions, keeps their projections current
// and answers queries. It is safe for concurrent use.
//
// Projections are applied from the feed, in global order, exactly once per
// event. Applying happens in the background while Run is running, and on
// demand before every query: a query first brings the projection up to
// every event this process's Store has saved (read your writes) and to the
// end of what the feed shows, so a query never misses a save that returned
// before it began. Several Projectors, in one process or many, may share a
// storage: each event is still applied exactly once, because a commit
// succeeds only from the checkpoint it started from.
type Projector struct {
	store   *Store
	storage Storage
	log     *slog.Logger
	batch   int
	poll    time.Duration
	running atomic.Int32
	kick    chan struct{}

	mu    sync.Mutex
	projs map[string]*proj
}

// proj is what a Projector knows of one projection.
type proj struct {
	c  *compiled
	mu sync.Mutex // serializes applying in this process
	// checkpoint is the feed position up to which this Projector has seen
	// the projection applied; it only grows.
	checkpoint atomic.Int64
}

// Projection is the current state of one projection instance.
type Projection struct {
	// Name is the projection name.
	Name string
	// ID is the aggregate id for a single projection, and the projection
	// name for an aggregated one.
	ID string
	// Aggregated reports which kind of projection it is.
	Aggregated bool
	// Data is the projection's JSON object. Values produced from numbers
	// (set from an event number, add, inc) are JSON strings holding exact
	// decimals, such as "0.3".
	Data json.RawMessage
	// UpdatedAt is the RecordedAt time of the last event applied.
	UpdatedAt time.Time
	// Position is the feed position of the last event applied; it changes
	// whenever the projection does, so it serves as an entity tag.
	Position int64
}

// Status describes a projection's progress.
type Status struct {
	// Definition is the projection's definition.
	Definition Definition
	// Checkpoint is the feed position the projection has been applied up
	// to.
	Checkpoint int64
	// Errors holds the most recent events the projection could not apply,
	// oldest first.
	Errors []ProjectionError
}

// NewProjector returns a Projector for the projections of st's storage.
func NewProjector(st *Store, opts *ProjectorOptions) *Projector {
	return &Projector{
		store:   st,
		storage: st.storage,
		log:     st.log,
		batch:   opts.batchSize(),
		poll:    opts.pollInterval(),
		kick:    make(chan struct{}, 1),
		projs:   make(map[string]*proj),
	}
}

// Create validates d and stores it. A definition created after events exist
// is built from the whole history of its feed. The name is unique: creating
// it again fails with ErrConflict, even with the same content. Invalid
// definitions fail with a *ValidationError naming each bad field, such as a
// selector not of the form $.projection.<field> or $.event.<field>.
func (p *Projector) Create(ctx context.Context, d Definition) error {
	c, err := compile(d)
	if err != nil {
		return err
	}
	if p.store.closed.Load() {
		return fmt.Errorf("create projection %q: %w", d.Name, ErrClosed)
	}
	spec, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("create projection %q: %w", d.Name, err)
	}
	rec := DefinitionRecord{Name: d.Name, Spec: spec, CreatedAt: p.store.now().UTC().Truncate(time.Microsecond)}
	if err := p.storage.CreateDefinition(ctx, rec); err != nil {
		return fmt.Errorf("create projection %q: %w", d.Name, err)
	}
	p.mu.Lock()
	if _, ok := p.projs[d.Name]; !ok {
		p.projs[d.Name] = &proj{c: c}
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	return nil
}

// lookup returns the projection named name, reading its definition from the
// storage the first time (it may have been created by another process).
func (p *Projector) lookup(ctx context.Context, name string) (*proj, error) {
	if msg := nameProblem(name); msg != "" {
		return nil, &ValidationError{Op: "projection", Fields: []FieldError{{Field: "projectionName", Message: msg}}}
	}
	if p.store.closed.Load() {
		return nil, fmt.Errorf("projection %q: %w", name, ErrClosed)
	}
	p.mu.Lock()
	pr := p.projs[name]
	p.mu.Unlock()
	if pr != nil {
		return pr, nil
	}
	rec, err := p.storage.Definition(ctx, name)
	if err != nil {
		return nil, wrapNotFound(fmt.Sprintf("projection %q", name), err)
	}
	return p.remember(rec)
}

func (p *Projector) remember(rec DefinitionRecord) (*proj, error) {
	var d Definition
	if err := json.Unmarshal(rec.Spec, &d); err != nil {
		return nil, fmt.Errorf("projection %q: stored definition is unreadable: %v", rec.Name, err)
	}
	c, err := compile(d)
	if err != nil {
		return nil, fmt.Errorf("projection %q: stored definition: %w", rec.Name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.projs[rec.Name]
	if pr == nil {
		pr = &proj{c: c}
		p.projs[rec.Name] = pr
	}
	return pr, nil
}

// Definition returns the definition of the projection named name, or an
// error wrapping ErrNotFound.
func (p *Projector) Definition(ctx context.Context, name string) (Definition, error) {
	pr, err := p.lookup(ctx, name)
	if err != nil {
		return Definition{}, err
	}
	return pr.c.def, nil
}

// Status returns the definition, checkpoint and recent errors of the
// projection named name, or an error wrapping ErrNotFound.
func (p *Projector) Status(ctx context.Context, name string) (Status, error) {
	pr, err := p.lookup(ctx, name)
	if err != nil {
		return Status{}, err
	}
	rec, err := p.storage.Definition(ctx, name)
	if err != nil {
		return Status{}, fmt.Errorf("projection %q: %w", name, err)
	}
	return Status{Definition: pr.c.def, Checkpoint: rec.Checkpoint, Errors: rec.Errors}, nil
}

// Single returns the instance of the single projection name for
// aggregateID, up to date with every save this process made before the
// call. It fails with ErrNotFound when the projection does not exist, is an
// aggregated one, or no handled event of that aggregate has arrived yet.
func (p *Projector) Single(ctx context.Context, name, aggregateID string) (Projection, error) {
	if msg := nameProblem(aggregateID); msg != "" {
		return Projection{}, &ValidationError{Op: "projection", Fields: []FieldError{{Field: "aggregateId", Message: msg}}}
	}
	return p.query(ctx, name, aggregateID, false)
}

// Aggregated returns the aggregated projection name, up to date with every
// save this process made before the call. It fails with ErrNotFound when
// the projection does not exist, is a single one, or no handled event has
// arrived yet.
func (p *Projector) Aggregated(ctx context.Context, name string) (Projection, error) {
	return p.query(ctx, name, "", true)
}

func (p *Projector) query(ctx context.Context, name, instance string, aggregated bool) (Projection, error) {
	pr, err := p.lookup(ctx, name)
	if err != nil {
		return Projection{}, err
	}
	if pr.c.def.Aggregated != aggregated {
		kind := "a single"
		if pr.c.def.Aggregated {
			kind = "an aggregated"
		}
		return Projection{}, fmt.Errorf("projection %q is %s projection: %w", name, kind, ErrNotFound)
	}
	if err := p.sync(ctx, pr); err != nil {
		return Projection{}, err
	}
	st, err := p.storage.LoadProjection(ctx, name, instance)
	if err != nil {
		if aggregated {
			return Projection{}, wrapNotFound(fmt.Sprintf("projection %q has no events yet", name), err)
		}
		return Projection{}, wrapNotFound(fmt.Sprintf("projection %q has no instance for %q", name, instance), err)
	}
	id := instance
	if aggregated {
		id = name
	}
	return Projection{Name: name, ID: id, Aggregated: aggregated, Data: st.Data, UpdatedAt: st.UpdatedAt, Position: st.Position}, nil
}

// Sync brings the projection named name up to date with every save this
// process's Store has made and with what the feed shows.
func (p *Projector) Sync(ctx context.Context, name string) error {
	pr, err := p.lookup(ctx, name)
	if err != nil {
		return err
	}
	return p.sync(ctx, pr)
}

// sync applies the feed to pr. When Run is keeping projections current and
// pr already covers this process's saves, it returns at once.
func (p *Projector) sync(ctx context.Context, pr *proj) error {
	target := p.store.lastPos.Load()
	if p.running.Load() > 0 && target > 0 && pr.checkpoint.Load() >= target {
		return nil
	}
	return p.catchUp(ctx, pr, target)
}

// Run keeps every projection current until ctx is done or the Store is
// closed; it returns nil then. It wakes on every save through this
// process's Store, on Create, and every PollInterval for saves made by
// other processes. Errors are logged and retried. Run is optional: queries
// catch up by themselves.
func (p *Projector) Run(ctx context.Context) error {
	p.running.Add(1)
	defer p.running.Add(-1)
	defer p.store.addProjector(p)() // deletions reach it (projection_forget.go)
	for {
		changed := p.store.watch()
		if p.store.closed.Load() || ctx.Err() != nil {
			return nil
		}
		if err := p.CatchUp(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
			p.log.Warn("eventstore: projector", "err", err)
		}
		// Saves through this Store, the Storage's AppendWatcher and Close
		// close changed; PollInterval is only the fallback (wake.go).
		if !p.store.waitChange(ctx, changed, p.kick, p.poll, time.Time{}) {
			return nil
		}
	}
}

// CatchUp brings every projection up to date, as Sync does for one.
func (p *Projector) CatchUp(ctx context.Context) error {
	recs, err := p.storage.Definitions(ctx)
	if err != nil {
		return fmt.Errorf("projections: %w", err)
	}
	var errs []error
	for _, rec := range recs {
		pr, err := p.lookup(ctx, rec.Name)
		if err == nil {
			err = p.catchUp(ctx, pr, p.store.lastPos.Load())
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
