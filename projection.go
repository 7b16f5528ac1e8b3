package eventstore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
)

// ProjectorOptions configures a Projector; nil means all defaults.
type ProjectorOptions struct {
	BatchSize int // feed events applied per storage commit; 1000 when 0
	// MaxInstanceBytes bounds an instance's JSON (1 MiB when 0): an event
	// that would grow one past it is an error and changes nothing.
	MaxInstanceBytes int
	MaxDefinitions   int            // 1000 when 0; one more is a *ValidationError
	Functions        FunctionCaller // calls handlers' FunctionURIs; nil refuses them
	// definitionsPoll is how often Run reads the list of stored
	// definitions again when it wakes (hooks.DefinitionsPoll). Changes
	// through this Projector take effect at once; other processes' within
	// about that time (their creator catches them up at once, and a query
	// of one catches it up by itself).
	defsPoll time.Duration
}

// batchSize defaults to limits.DefaultBatchSize, 1,000 events per commit: a
// rebuild over 100,000 events ran at 0.62 (PostgreSQL) and 0.72 (SQLite)
// of a hand-written fold that commits per 1,000 with 500, and at 0.76 and
// 0.83 with 1,000 (bench/, -workloads rebuild); each commit rewrites every
// instance the page touched, with its list indexes.
func (o *ProjectorOptions) batchSize() int {
	if o == nil || o.BatchSize <= 0 {
		return limits.DefaultBatchSize
	}
	return o.BatchSize
}

func (o *ProjectorOptions) definitionsPoll() time.Duration {
	if o == nil || o.defsPoll <= 0 {
		return defaultDefinitionsPoll
	}
	return o.defsPoll
}

func (o *ProjectorOptions) maxInstance() int {
	if o == nil || o.MaxInstanceBytes <= 0 {
		return limits.DefaultMaxInstanceBytes
	}
	return o.MaxInstanceBytes
}

func (o *ProjectorOptions) maxDefinitions() int {
	if o == nil || o.MaxDefinitions <= 0 {
		return limits.DefaultMaxDefinitions
	}
	return o.MaxDefinitions
}

func (o *ProjectorOptions) functionCaller() FunctionCaller {
	if o == nil {
		return nil
	}
	return o.Functions
}

// Projector manages projection definitions, keeps their projections
// current (see Consistency in the package doc) and answers queries, which
// read this process's saves; while a replacement (Put) is rebuilt they
// answer from the current definition. It is safe for concurrent use.
type Projector struct {
	store       *Store
	storage     storage.Storage
	log         *slog.Logger
	batch       int
	poll        time.Duration // the Store's Options.PollInterval
	relist      time.Duration // hooks.DefinitionsPoll
	maxInstance int
	maxDefs     int
	functions   FunctionCaller
	running     atomic.Int32
	kick        chan struct{}

	mu    sync.Mutex
	projs map[string]*proj
	// code are the projections in Go registered (Register), by name.
	code map[string]*compiled
	// busy names the projections caught up apart (catchUpApart).
	busy map[string]bool
	// rebuilds are the projections being rebuilt after a rewind, by
	// name (rewind.go).
	rebuilds map[string]rewindRebuild
	// rebuildsNoted counts the rebuilds noted (rebuildMark).
	rebuildsNoted uint64
	// listed are the names of the stored definitions as Run last read
	// them, at listedAt, when wake had been called changes times; Run
	// reads them again after relist, or at once after wake (a definition
	// changed in this process). Guarded by mu.
	listed   []string
	listedAt time.Time
	listedAs uint64
	changes  uint64
}

// defaultDefinitionsPoll is how long Run goes on by default with the
// definitions it listed before it lists them again: the wake-ups of saves,
// many a second, then cost no read of the definitions. A definition
// created or replaced by another process is caught up by that process, and
// by this one's Run within that time (a query catches it up at once).
const defaultDefinitionsPoll = time.Second

// proj is what a Projector knows of one stored definition.
type proj struct {
	name string // the storage name: the projection's, or its replacement's
	c    atomic.Pointer[compiled]
	mu   sync.Mutex // serializes applying in this process; guards spec
	spec []byte     // the stored spec c was compiled from
	// checkpoint is the feed position up to which this Projector has seen
	// the projection applied.
	checkpoint atomic.Int64
	// stored is the checkpoint the storage holds for spec as this
	// Projector last committed or read it, valid while storedOK and no
	// deletion has begun since the Store's deletion count was storedGen.
	// A catch-up that starts from it reads no definition: should another
	// process or call have moved the checkpoint or replaced the spec
	// since, the commit's compare-and-set refuses and the catch-up reads
	// the definition then. Guarded by mu.
	stored    int64
	storedGen int64
	storedOK  bool
	// recent are instances as this Projector last committed them, when
	// that commit moved the checkpoint to recentAt while the Store's
	// deletion count was recentGen: a catch-up from recentAt takes them
	// instead of loading them, since its commit's compare-and-set only
	// succeeds if nobody committed since (the states are then the stored
	// ones). They accumulate over the commits of a catch-up (up to
	// maxCatchUpRecent, and maxRecent between catch-ups); nil when
	// unknown. recentAll is set when they are every instance stored: they
	// accumulated from a commit from checkpoint 0, where a projection has
	// no instances, so an instance not among them does not exist and a
	// rebuild loads none. recentBytes is the sum of their Data's lengths.
	// Guarded by mu.
	recent      map[string]storage.ProjectionState
	recentAt    int64
	recentGen   int64
	recentAll   bool
	recentBytes int
	// warned is the stored version of a projection in Go this Projector
	// last warned it does not apply (skipForeign). Guarded by mu.
	warned int64
	// rewinds is the Store's count of rewinds when a catch-up last
	// checked the stored checkpoint against the storage (checkRewound).
	// Guarded by mu.
	rewinds int64
	// beforeRewind is checkpoint as it was when a rewind made the
	// Projector forget it (forgetRewound), until checkRewound reads it.
	beforeRewind atomic.Int64
}

// maxRecent bounds proj.recent between catch-ups: an aggregated
// projection needs one instance, a projection of a few busy aggregates a
// few.
const maxRecent = 64

// maxCatchUpRecent and maxCatchUpRecentBytes bound proj.recent during a
// catch-up, which keeps the instances it committed so that a rebuild loads
// each at most once (none when it started from checkpoint 0): 100,000
// instances, their Data 32 MiB at most.
const (
	maxCatchUpRecent      = 100_000
	maxCatchUpRecentBytes = 32 << 20
)

// keepRecent records the states of commit, made while the Store's
// deletion count was gen, in pr.recent; pr.mu is held.
func (pr *proj) keepRecent(commit storage.ProjectionCommit, gen int64) {
	if pr.recent == nil || pr.recentAt != commit.From || pr.recentGen != gen {
		pr.recent, pr.recentBytes = make(map[string]storage.ProjectionState, len(commit.States)), 0
		// At checkpoint 0 a projection has no instances: the commit's are
		// all of them.
		pr.recentAll = commit.From == 0
	}
	for _, st := range commit.States {
		pr.recentBytes += len(st.Data) - len(pr.recent[st.InstanceID].Data)
		pr.recent[st.InstanceID] = st
	}
	for _, id := range commit.Deletes {
		pr.recentBytes -= len(pr.recent[id].Data)
		delete(pr.recent, id)
	}
	pr.recentAt, pr.recentGen = commit.To, gen
	if len(pr.recent) > maxCatchUpRecent || pr.recentBytes > maxCatchUpRecentBytes {
		// Over the bound: keep this commit's states alone, if they fit.
		pr.recent, pr.recentBytes, pr.recentAll = nil, 0, false
		if len(commit.States) <= maxCatchUpRecent {
			pr.recent = make(map[string]storage.ProjectionState, len(commit.States))
			for _, st := range commit.States {
				pr.recentBytes += len(st.Data)
				pr.recent[st.InstanceID] = st
			}
			if pr.recentBytes > maxCatchUpRecentBytes {
				pr.recent, pr.recentBytes = nil, 0
			}
		}
	}
}

// trimRecent bounds pr.recent to maxRecent when a catch-up ends; pr.mu is
// held.
func (pr *proj) trimRecent() {
	if len(pr.recent) > maxRecent {
		pr.recent, pr.recentBytes, pr.recentAll = nil, 0, false
	}
}

// remember records under pr.mu that the storage holds checkpoint for
// pr.spec, as known while the Store's deletion count was gen.
func (pr *proj) remember(checkpoint, gen int64) {
	pr.stored, pr.storedGen, pr.storedOK = checkpoint, gen, true
}

// replacementSuffix marks the storage name of a definition being rebuilt
// to replace another. Names cannot hold '/', so it never clashes.
const replacementSuffix = "/next"

// Projection is the current state of one projection instance.
type Projection struct {
	Name                 string
	ID                   string // the aggregate id or IDField value; an aggregated one's Name
	Aggregated           bool
	Data                 json.RawMessage // a JSON object; numbers are JSON strings (see Decimal)
	CreatedAt, UpdatedAt time.Time       // RecordedAt of the first and last event applied
	Reference            Reference       // set by setref, if any
	Position             int64           // of the last event applied: an entity tag
}

// Status describes a projection's progress.
type Status struct {
	Definition        Definition
	Checkpoint, Head  int64 // the feed position applied up to; the latest
	Behind            int64 // at most Head - Checkpoint; 0 when no event of its feed follows
	Rebuilding        bool  // a replacement (Put) is being built, up to RebuildCheckpoint
	RebuildCheckpoint int64
	RebuildReason     string // while it is rebuilt after a rewind lost events it had applied: why
	Instances         int64
	Errors            []ProjectionError // the most recent, oldest first
}

// NewProjector returns a Projector for the projections of st's storage.
func NewProjector(st *Store, opts *ProjectorOptions) *Projector {
	return &Projector{
		store:       st,
		storage:     st.storage,
		log:         st.log,
		batch:       opts.batchSize(),
		poll:        st.bg.poll,
		relist:      opts.definitionsPoll(),
		maxInstance: opts.maxInstance(),
		maxDefs:     opts.maxDefinitions(),
		functions:   opts.functionCaller(),
		kick:        make(chan struct{}, 1),
		projs:       make(map[string]*proj),
		code:        make(map[string]*compiled),
		busy:        make(map[string]bool),
	}
}

func (p *Projector) wake() {
	p.mu.Lock()
	p.changes++
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
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
	c, err := p.decodeStored(rec)
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

// refresh recompiles pr from a changed stored definition. pr.mu is held.
func (p *Projector) refresh(pr *proj, rec storage.DefinitionRecord) (*compiled, error) {
	c, err := p.decodeStored(rec)
	if err != nil {
		return nil, err
	}
	pr.c.Store(c)
	pr.spec = rec.Spec
	pr.storedOK = false
	pr.recent = nil
	pr.checkpoint.Store(rec.Checkpoint)
	return c, nil
}
