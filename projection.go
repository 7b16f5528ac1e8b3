package eventstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
	// MaxInstanceBytes bounds the JSON size of one projection instance.
	// An event that would grow an instance past it is a recorded error and
	// the instance keeps its state. The default is DefaultMaxInstanceBytes.
	MaxInstanceBytes int
	// MaxDefinitions bounds the number of projection definitions; creating
	// one more fails with a *ValidationError. The default is
	// DefaultMaxDefinitions.
	MaxDefinitions int
}

// Defaults of ProjectorOptions.
const (
	DefaultMaxInstanceBytes = 1 << 20
	DefaultMaxDefinitions   = 1000
)

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

func (o *ProjectorOptions) maxInstance() int {
	if o == nil || o.MaxInstanceBytes <= 0 {
		return DefaultMaxInstanceBytes
	}
	return o.MaxInstanceBytes
}

func (o *ProjectorOptions) maxDefinitions() int {
	if o == nil || o.MaxDefinitions <= 0 {
		return DefaultMaxDefinitions
	}
	return o.MaxDefinitions
}

// Projector manages projection definitions, keeps their projections
// current and answers queries. It is safe for concurrent use.
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
	store       *Store
	storage     Storage
	log         *slog.Logger
	batch       int
	poll        time.Duration
	maxInstance int
	maxDefs     int
	running     atomic.Int32
	kick        chan struct{}

	mu    sync.Mutex
	projs map[string]*proj
}

// proj is what a Projector knows of one stored definition.
type proj struct {
	name string // the storage name: the projection's, or its replacement's
	c    atomic.Pointer[compiled]
	mu   sync.Mutex // serializes applying in this process; guards spec
	spec []byte     // the stored spec c was compiled from
	// checkpoint is the feed position up to which this Projector has seen
	// the projection applied.
	checkpoint atomic.Int64
}

// replacementSuffix marks the storage name of a definition being rebuilt
// to replace another. Names cannot hold '/', so it never clashes.
const replacementSuffix = "/next"

// Projection is the current state of one projection instance.
type Projection struct {
	// Name is the projection name.
	Name string
	// ID is the instance id for a single projection (the aggregate id, or
	// the idField value), and the projection name for an aggregated one.
	ID string
	// Aggregated reports which kind of projection it is.
	Aggregated bool
	// Data is the projection's JSON object. Values produced from numbers
	// (set from an event number, add, inc, ...) are JSON strings holding
	// exact decimals, such as "0.3".
	Data json.RawMessage
	// CreatedAt and UpdatedAt are the RecordedAt times of the first and
	// last event applied.
	CreatedAt, UpdatedAt time.Time
	// Reference is the value marked by setref, if any.
	Reference Reference
	// Position is the feed position of the last event applied; it changes
	// whenever the projection does, so it serves as an entity tag.
	Position int64
}

// Status describes a projection's progress.
type Status struct {
	// Definition is the projection's definition.
	Definition Definition
	// Checkpoint is the feed position the projection has been applied up
	// to; Head the highest position of the feed.
	Checkpoint, Head int64
	// Rebuilding reports that a replacement definition is being built
	// from history; queries answer from the current one until it is done.
	Rebuilding bool
	// RebuildCheckpoint is how far the replacement has got.
	RebuildCheckpoint int64
	// Instances counts the projection's instances.
	Instances int64
	// Errors holds the most recent events the projection could not apply,
	// oldest first.
	Errors []ProjectionError
}

// NewProjector returns a Projector for the projections of st's storage.
func NewProjector(st *Store, opts *ProjectorOptions) *Projector {
	return &Projector{
		store:       st,
		storage:     st.storage,
		log:         st.log,
		batch:       opts.batchSize(),
		poll:        opts.pollInterval(),
		maxInstance: opts.maxInstance(),
		maxDefs:     opts.maxDefinitions(),
		kick:        make(chan struct{}, 1),
		projs:       make(map[string]*proj),
	}
}

func (p *Projector) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Create validates d and stores it. A definition created after events exist
// is built from the whole history of its feed. The name is unique: creating
// it again fails with ErrConflict, even with the same content (Put creates
// or replaces). Invalid definitions fail with a *ValidationError naming
// each bad field.
func (p *Projector) Create(ctx context.Context, d Definition) error {
	c, err := compile(d)
	if err != nil {
		return err
	}
	if err := p.checkOpen("create projection", d.Name); err != nil {
		return err
	}
	if err := p.checkCount(ctx); err != nil {
		return err
	}
	if err := p.storage.CreateDefinition(ctx, p.record(d.Name, c)); err != nil {
		return fmt.Errorf("create projection %q: %w", d.Name, err)
	}
	p.wake()
	return nil
}

// PutResult says what Projector.Put did.
type PutResult uint8

// Outcomes of Put.
const (
	// Created: there was no definition of that name.
	Created PutResult = iota + 1
	// Unchanged: the stored definition is the same.
	Unchanged
	// Replacing: a different definition is being rebuilt from history; it
	// replaces the current one once it has caught up (Run, CatchUp or Sync
	// builds it), and queries answer from the current one until then.
	Replacing
)

// Put creates the definition, or replaces the one of the same name. A
// replacement is rebuilt from the whole history while queries keep
// answering from the current definition; it takes over in one step once it
// has caught up. Putting an identical definition changes nothing, so a
// program may call Put at every start.
func (p *Projector) Put(ctx context.Context, d Definition) (PutResult, error) {
	c, err := compile(d)
	if err != nil {
		return 0, err
	}
	if err := p.checkOpen("put projection", d.Name); err != nil {
		return 0, err
	}
	rec, err := p.storage.Definition(ctx, d.Name)
	switch {
	case errors.Is(err, ErrNotFound):
		if err := p.Create(ctx, d); err != nil {
			return 0, err
		}
		return Created, nil
	case err != nil:
		return 0, fmt.Errorf("put projection %q: %w", d.Name, err)
	}
	shadow := d.Name + replacementSuffix
	if sameSpec(rec.Spec, c.spec) {
		// Back to the current definition: drop a pending replacement.
		if err := p.storage.DeleteDefinition(ctx, shadow); err != nil && !errors.Is(err, ErrNotFound) {
			return 0, fmt.Errorf("put projection %q: %w", d.Name, err)
		}
		p.forget(shadow)
		return Unchanged, nil
	}
	if pending, err := p.storage.Definition(ctx, shadow); err == nil && sameSpec(pending.Spec, c.spec) {
		return Replacing, nil
	}
	if err := p.storage.DeleteDefinition(ctx, shadow); err != nil && !errors.Is(err, ErrNotFound) {
		return 0, fmt.Errorf("put projection %q: %w", d.Name, err)
	}
	p.forget(shadow)
	if err := p.storage.CreateDefinition(ctx, p.record(shadow, c)); err != nil {
		return 0, fmt.Errorf("put projection %q: %w", d.Name, err)
	}
	p.wake()
	return Replacing, nil
}

// sameSpec reports whether a stored spec compiles to the canonical spec.
func sameSpec(stored, canonical []byte) bool {
	if string(stored) == string(canonical) {
		return true
	}
	var d Definition
	if json.Unmarshal(stored, &d) != nil {
		return false
	}
	c, err := compile(d)
	return err == nil && string(c.spec) == string(canonical)
}

func (p *Projector) record(name string, c *compiled) DefinitionRecord {
	return DefinitionRecord{Name: name, Spec: c.spec, CreatedAt: p.store.now().UTC().Truncate(time.Microsecond)}
}

func (p *Projector) checkOpen(op, name string) error {
	if p.store.closed.Load() {
		return fmt.Errorf("%s %q: %w", op, name, ErrClosed)
	}
	return nil
}

// checkCount refuses a definition beyond MaxDefinitions.
func (p *Projector) checkCount(ctx context.Context) error {
	recs, err := p.storage.Definitions(ctx)
	if err != nil {
		return fmt.Errorf("projections: %w", err)
	}
	n := 0
	for _, r := range recs {
		if !strings.HasSuffix(r.Name, replacementSuffix) {
			n++
		}
	}
	if n >= p.maxDefs {
		return &ValidationError{Op: "projection definition", Fields: []FieldError{{Field: "projectionName", Message: fmt.Sprintf("at most %d projection definitions are allowed", p.maxDefs)}}}
	}
	return nil
}

// Delete removes the projection named name with its instances, and a
// pending replacement. The name can be used again.
func (p *Projector) Delete(ctx context.Context, name string) error {
	if err := checkProjectionName(name); err != nil {
		return err
	}
	if err := p.checkOpen("delete projection", name); err != nil {
		return err
	}
	pr := p.cached(name)
	if pr != nil {
		pr.mu.Lock()
		defer pr.mu.Unlock()
	}
	err := p.storage.DeleteDefinition(ctx, name)
	if err2 := p.storage.DeleteDefinition(ctx, name+replacementSuffix); err2 != nil && !errors.Is(err2, ErrNotFound) && err == nil {
		err = err2
	}
	p.forget(name)
	p.forget(name + replacementSuffix)
	if err != nil {
		return wrapNotFound(fmt.Sprintf("projection %q", name), err)
	}
	return nil
}

// Reset drops every instance of the projection named name and rebuilds it
// from the start of the feed (on the next query, Sync, CatchUp or Run).
func (p *Projector) Reset(ctx context.Context, name string) error {
	pr, err := p.lookup(ctx, name)
	if err != nil {
		return err
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if err := p.storage.ResetProjection(ctx, name); err != nil {
		return wrapNotFound(fmt.Sprintf("projection %q", name), err)
	}
	pr.checkpoint.Store(0)
	p.wake()
	return nil
}

func checkProjectionName(name string) error {
	if msg := nameProblem(name); msg != "" {
		return &ValidationError{Op: "projection", Fields: []FieldError{{Field: "projectionName", Message: msg}}}
	}
	return nil
}

func (p *Projector) cached(name string) *proj {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.projs[name]
}

// forget drops what this Projector cached of a storage name.
func (p *Projector) forget(name string) {
	p.mu.Lock()
	delete(p.projs, name)
	p.mu.Unlock()
}

// lookup returns the projection named name, reading its definition from the
// storage the first time (it may have been created by another process).
func (p *Projector) lookup(ctx context.Context, name string) (*proj, error) {
	if err := checkProjectionName(name); err != nil {
		return nil, err
	}
	return p.lookupStored(ctx, name)
}

func (p *Projector) lookupStored(ctx context.Context, name string) (*proj, error) {
	if err := p.checkOpen("projection", name); err != nil {
		return nil, err
	}
	if pr := p.cached(name); pr != nil {
		return pr, nil
	}
	rec, err := p.storage.Definition(ctx, name)
	if err != nil {
		return nil, wrapNotFound(fmt.Sprintf("projection %q", name), err)
	}
	c, err := decodeStored(rec)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.projs[name]
	if pr == nil {
		pr = &proj{name: name, spec: rec.Spec}
		pr.c.Store(c)
		p.projs[name] = pr
	}
	return pr, nil
}

func decodeStored(rec DefinitionRecord) (*compiled, error) {
	var d Definition
	if err := json.Unmarshal(rec.Spec, &d); err != nil {
		return nil, fmt.Errorf("projection %q: stored definition is unreadable: %v", rec.Name, err)
	}
	c, err := compile(d)
	if err != nil {
		return nil, fmt.Errorf("projection %q: stored definition: %w", rec.Name, err)
	}
	return c, nil
}

// refresh recompiles pr from a changed stored definition. pr.mu is held.
func (p *Projector) refresh(pr *proj, rec DefinitionRecord) (*compiled, error) {
	c, err := decodeStored(rec)
	if err != nil {
		return nil, err
	}
	pr.c.Store(c)
	pr.spec = rec.Spec
	pr.checkpoint.Store(rec.Checkpoint)
	return c, nil
}

// Definition returns the definition of the projection named name, or an
// error wrapping ErrNotFound. It is the definition last given to Put or
// Create: while a replacement is being rebuilt (Status reports Rebuilding)
// it returns the replacement, although queries still answer from the
// definition it replaces until it has caught up.
func (p *Projector) Definition(ctx context.Context, name string) (Definition, error) {
	pr, err := p.lookup(ctx, name)
	if err != nil {
		return Definition{}, err
	}
	next, err := p.storage.Definition(ctx, name+replacementSuffix)
	switch {
	case errors.Is(err, ErrNotFound):
		return pr.c.Load().def, nil
	case err != nil:
		return Definition{}, fmt.Errorf("projection %q: %w", name, err)
	}
	c, err := decodeStored(next)
	if err != nil {
		return Definition{}, err
	}
	c.def.Name = name
	return c.def, nil
}

// Definitions returns every definition, ordered by name, as Definition
// returns them: a replacement being rebuilt is listed in the place of the
// definition it replaces.
func (p *Projector) Definitions(ctx context.Context) ([]Definition, error) {
	recs, err := p.storage.Definitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("projections: %w", err)
	}
	pending := make(map[string]DefinitionRecord)
	for _, rec := range recs {
		if base, ok := strings.CutSuffix(rec.Name, replacementSuffix); ok {
			pending[base] = rec
		}
	}
	out := make([]Definition, 0, len(recs))
	for _, rec := range recs {
		if strings.HasSuffix(rec.Name, replacementSuffix) {
			continue
		}
		if next, ok := pending[rec.Name]; ok {
			rec = next
		}
		c, err := decodeStored(rec)
		if err != nil {
			return nil, err
		}
		c.def.Name = strings.TrimSuffix(rec.Name, replacementSuffix)
		out = append(out, c.def)
	}
	return out, nil
}

// Status returns the definition, progress, instance count and recent
// errors of the projection named name, or an error wrapping ErrNotFound.
func (p *Projector) Status(ctx context.Context, name string) (Status, error) {
	if err := checkProjectionName(name); err != nil {
		return Status{}, err
	}
	rec, err := p.storage.Definition(ctx, name)
	if err != nil {
		return Status{}, wrapNotFound(fmt.Sprintf("projection %q", name), err)
	}
	var next *DefinitionRecord
	switch r, err := p.storage.Definition(ctx, name+replacementSuffix); {
	case err == nil:
		next = &r
	case !errors.Is(err, ErrNotFound):
		return Status{}, fmt.Errorf("projection %q: %w", name, err)
	}
	head, err := p.storage.FeedHead(ctx, "")
	if err != nil {
		return Status{}, fmt.Errorf("projection %q: %w", name, err)
	}
	return p.status(ctx, rec, next, head)
}

// status completes the Status of rec, whose replacement being rebuilt is
// next (nil for none), with the feed's head.
func (p *Projector) status(ctx context.Context, rec DefinitionRecord, next *DefinitionRecord, head int64) (Status, error) {
	c, err := decodeStored(rec)
	if err != nil {
		return Status{}, err
	}
	st := Status{Definition: c.def, Checkpoint: rec.Checkpoint, Head: head, Errors: rec.Errors}
	list, err := p.storage.ListProjections(ctx, ProjectionQuery{Name: rec.Name})
	if err != nil {
		return Status{}, fmt.Errorf("projection %q: %w", rec.Name, err)
	}
	st.Instances = list.Total
	if next != nil {
		st.Rebuilding, st.RebuildCheckpoint = true, next.Checkpoint
	}
	return st, nil
}

// Overview returns the Status of every projection, ordered by name. It
// reads the definitions and the feed's head once for all of them.
func (p *Projector) Overview(ctx context.Context) ([]Status, error) {
	recs, err := p.storage.Definitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("projections: %w", err)
	}
	head, err := p.storage.FeedHead(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("projections: %w", err)
	}
	replacements := make(map[string]*DefinitionRecord)
	for i := range recs {
		if name, ok := strings.CutSuffix(recs[i].Name, replacementSuffix); ok {
			replacements[name] = &recs[i]
		}
	}
	out := make([]Status, 0, len(recs)-len(replacements))
	for _, rec := range recs {
		if strings.HasSuffix(rec.Name, replacementSuffix) {
			continue
		}
		st, err := p.status(ctx, rec, replacements[rec.Name], head)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
