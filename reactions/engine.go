package reactions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/storage"
	"go.opentelemetry.io/otel/trace"
)

// ErrUnsupported reports a Storage that does not implement
// storage.ReactionStorage.
var ErrUnsupported = errors.New("reactions: the storage cannot keep reactions")

// Func is the Go action of a definition of type ActionFunc. A nil error
// completes the reaction; an error fails the attempt, which is retried.
type Func func(ctx context.Context, d Delivery) error

// Delivery is what an action receives.
type Delivery struct {
	// Reaction is the reaction attempted; Reaction.Attempts counts this
	// attempt.
	Reaction Reaction
	// Body is the JSON an HTTP action POSTs: {"metadata":{...},"event":{...}}.
	Body json.RawMessage
}

// Options configures an Engine. A nil *Options means all defaults.
type Options struct {
	// Now returns the current time; time.Now by default.
	Now func() time.Time
	// Logger receives diagnostics; discarded by default.
	Logger *slog.Logger
	// Funcs are the Go actions, by the name an ActionFunc definition gives.
	// Every process running reactions of the same storage needs the same
	// Funcs: a reaction whose function is missing fails its attempt.
	Funcs map[string]Func
	// Outbound is the policy for HTTP targets; nil refuses loopback,
	// link-local, unspecified and multicast addresses (see Outbound).
	Outbound *Outbound
	// Backoff is the delay before the first retry, doubled for each later
	// one; DefaultBackoff when 0.
	Backoff time.Duration
	// Attempts is how many attempts a reaction gets before it is FAILED;
	// DefaultAttempts when 0.
	Attempts int
	// Concurrency is how many reactions this process attempts at once;
	// DefaultConcurrency when 0.
	Concurrency int
	// Timeout bounds one attempt (the whole HTTP call, or the Func);
	// DefaultTimeout when 0. The claim's lease is twice Timeout plus a
	// minute: a claimed reaction may wait for a free slot for up to one
	// Timeout, then is attempted for up to another.
	Timeout time.Duration
	// MaxResponseBytes is how much of an answer is read; 64 KiB when 0.
	MaxResponseBytes int64
	// MaxDefinitions bounds the number of definitions;
	// DefaultMaxDefinitions when 0.
	MaxDefinitions int
	// PollInterval is how often Run looks for events and due reactions
	// written by other processes when nothing woke it; one second when 0.
	PollInterval time.Duration
	// Tenant, when set, is the id of the tenant whose Store the Engine
	// serves: every delivery's metadata then carries it as tenantId, so
	// that one receiver can serve every tenant (package tenancy sets it).
	Tenant string
	// TracerProvider receives a span per delivery, linked to the save of
	// the event that scheduled it (docs/tracing.md); HTTP deliveries send
	// its traceparent. Nil follows OpenTelemetry's global provider, which
	// traces nothing until the program installs one.
	TracerProvider trace.TracerProvider
}

// Defaults of Options.
const (
	DefaultBackoff     = 5 * time.Second
	DefaultAttempts    = 5
	DefaultConcurrency = 32
	DefaultTimeout     = 10 * time.Second
)

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Engine schedules, stores and delivers reactions for one Store. It is safe
// for concurrent use. Definitions are managed with Create, Put and Delete;
// reactions with Reactions, Cancel and Execute. Run does the work.
type Engine struct {
	st   *eventstore.Store
	rs   storage.ReactionStorage
	now  func() time.Time
	log  *slog.Logger
	out  *Outbound
	http *http.Client
	fns  map[string]Func

	backoff        time.Duration
	attempts       int
	concurrency    int
	timeout, lease time.Duration
	maxResponse    int64
	maxDefs        int
	poll           time.Duration

	wakeSched, wakeDeliver chan struct{}
	budget                 *budget // shared with the Engines of ForTenant

	mu      sync.Mutex
	defs    map[string]*compiled  // by spec, for deliveries
	specs   map[string]cachedSpec // by name, for deliveries
	scanned map[string]scanned    // by definition name, for scheduling

	schedDefs     []storage.ReactionDefinitionRecord // the definitions, for scheduling rounds
	schedDefsRead time.Time                          // when schedDefs was read; zero: read again

	opts   Options // as given to New, for ForTenant
	tracer *tracing.Tracer
}

// New returns an Engine scheduling the events of st into rs, which must be
// the Storage st was made on (or share its database): package reactions
// keeps its data beside the events. A Storage without reactions support
// fails with ErrUnsupported.
func New(st *eventstore.Store, s storage.Storage, opts *Options) (*Engine, error) {
	rs, ok := s.(storage.ReactionStorage)
	if st == nil || !ok {
		return nil, fmt.Errorf("reactions: new: %w", ErrUnsupported)
	}
	if opts == nil {
		opts = &Options{}
	}
	e := &Engine{
		st: st, rs: rs,
		now:         opts.Now,
		log:         opts.Logger,
		out:         opts.Outbound,
		fns:         opts.Funcs,
		backoff:     orDefault(opts.Backoff, DefaultBackoff),
		attempts:    orDefault(opts.Attempts, DefaultAttempts),
		concurrency: orDefault(opts.Concurrency, DefaultConcurrency),
		timeout:     orDefault(opts.Timeout, DefaultTimeout),
		maxResponse: orDefault(opts.MaxResponseBytes, 64<<10),
		maxDefs:     orDefault(opts.MaxDefinitions, DefaultMaxDefinitions),
		poll:        orDefault(opts.PollInterval, time.Second),
		wakeSched:   make(chan struct{}, 1),
		wakeDeliver: make(chan struct{}, 1),
		defs:        make(map[string]*compiled),
		specs:       make(map[string]cachedSpec),
		scanned:     make(map[string]scanned),
	}
	e.opts = *opts
	e.tracer = tracing.New(opts.TracerProvider)
	if opts.Now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.out == nil {
		e.out = &Outbound{}
	}
	e.lease = 2*e.timeout + time.Minute
	e.budget = newBudget(e.concurrency)
	e.http = e.out.client(e.timeout)
	return e, nil
}

// ForTenant returns an Engine for the Store of a tenant, st on s, with
// e's options but Tenant (which every delivery's metadata carries, and
// every line it logs), as package tenancy makes one per open tenant. It
// shares e's HTTP connections, so that a thousand tenants' Engines calling one receiver
// keep one pool of connections to it, not one each. Its PollInterval is
// 30 s unless e's options set one: saves through its Store wake it at
// once, and the poll only finds the work of other processes, which do it
// themselves while they run (a thousand tenants polling every second
// would cost a thousand reads a second). Concurrency bounds the attempts
// of e and all its tenants' Engines together, not of each.
func (e *Engine) ForTenant(st *eventstore.Store, s storage.Storage, tenant string) (*Engine, error) {
	o := e.opts
	o.Tenant = tenant
	if o.Logger != nil {
		o.Logger = o.Logger.With("tenant", tenant)
	}
	if o.PollInterval == 0 {
		o.PollInterval = tenantPoll
	}
	t, err := New(st, s, &o)
	if err != nil {
		return nil, err
	}
	t.http, t.budget = e.http, e.budget
	return t, nil
}

// tenantPoll is the PollInterval of ForTenant's Engines by default.
const tenantPoll = 30 * time.Second

func wake(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// checkTarget is compile's check of an HTTP target.
func (e *Engine) checkTarget(ctx context.Context) func(u *url.URL) error {
	return func(u *url.URL) error { return e.out.CheckURL(ctx, u) }
}

// Create stores a new definition. Events of its feed stored before it
// never schedule reactions: it starts at the feed's head. A definition of
// that name fails with ErrConflict, a bad one with a
// *eventstore.ValidationError naming the field.
func (e *Engine) Create(ctx context.Context, d Definition) error {
	c, err := compile(d, "create reaction definition", e.checkTarget(ctx))
	if err != nil {
		return err
	}
	defs, err := e.rs.ReactionDefinitions(ctx)
	if err != nil {
		return fmt.Errorf("create reaction definition %s: %w", d.Name, err)
	}
	if len(defs) >= e.maxDefs {
		return &eventstore.ValidationError{Op: "create reaction definition", Fields: []eventstore.FieldError{
			{Field: "reactionName", Message: fmt.Sprintf("there are %d definitions already, the most allowed", e.maxDefs)}}}
	}
	head, err := e.head(ctx, d.FeedName)
	if err != nil {
		return fmt.Errorf("create reaction definition %s: %w", d.Name, err)
	}
	rec := storage.ReactionDefinitionRecord{Name: d.Name, Spec: c.spec, CreatedAt: e.now(), Checkpoint: head}
	if err := e.rs.CreateReactionDefinition(ctx, rec); err != nil {
		return fmt.Errorf("create reaction definition %s: %w", d.Name, err)
	}
	e.forgetDefinitions()
	wake(e.wakeSched)
	return nil
}

// head is the FeedSequence of the latest batch of feed, 0 for none.
func (e *Engine) head(ctx context.Context, feed string) (int64, error) {
	h, err := e.st.FeedHead(ctx, feed)
	if errors.Is(err, eventstore.ErrNotFound) {
		return 0, nil
	}
	return h, err
}

// Put creates the definition or replaces the one of its name, and reports
// whether it created it. A replacement keeps the reactions already
// scheduled and its place in the feed, unless it now reads another feed:
// it then starts at that feed's head.
func (e *Engine) Put(ctx context.Context, d Definition) (created bool, err error) {
	c, err := compile(d, "put reaction definition", e.checkTarget(ctx))
	if err != nil {
		return false, err
	}
	old, err := e.rs.ReactionDefinition(ctx, d.Name)
	if errors.Is(err, eventstore.ErrNotFound) {
		if err := e.Create(ctx, d); !errors.Is(err, eventstore.ErrConflict) {
			return err == nil, err
		}
		old, err = e.rs.ReactionDefinition(ctx, d.Name)
	}
	if err != nil {
		return false, fmt.Errorf("put reaction definition %s: %w", d.Name, err)
	}
	var prev Definition
	checkpoint := int64(-1)
	if json.Unmarshal(old.Spec, &prev) != nil || prev.FeedName != d.FeedName {
		if checkpoint, err = e.head(ctx, d.FeedName); err != nil {
			return false, fmt.Errorf("put reaction definition %s: %w", d.Name, err)
		}
	}
	if err := e.rs.UpdateReactionDefinition(ctx, d.Name, c.spec, checkpoint); err != nil {
		return false, fmt.Errorf("put reaction definition %s: %w", d.Name, err)
	}
	e.forgetDefinitions()
	wake(e.wakeSched)
	return false, nil
}

// Definition returns the definition named name, or an error wrapping
// ErrNotFound.
func (e *Engine) Definition(ctx context.Context, name string) (Definition, error) {
	rec, err := e.rs.ReactionDefinition(ctx, name)
	if err != nil {
		return Definition{}, fmt.Errorf("reaction definition %s: %w", name, err)
	}
	var d Definition
	if err := json.Unmarshal(rec.Spec, &d); err != nil {
		return Definition{}, fmt.Errorf("reaction definition %s: stored spec: %v", name, err)
	}
	d.CreatedAt = rec.CreatedAt
	return d, nil
}

// Definitions returns every definition, ordered by name.
func (e *Engine) Definitions(ctx context.Context) ([]Definition, error) {
	recs, err := e.rs.ReactionDefinitions(ctx)
	if err != nil {
		return nil, fmt.Errorf("reaction definitions: %w", err)
	}
	out := make([]Definition, 0, len(recs))
	for _, rec := range recs {
		var d Definition
		if err := json.Unmarshal(rec.Spec, &d); err != nil {
			return nil, fmt.Errorf("reaction definition %s: stored spec: %v", rec.Name, err)
		}
		d.CreatedAt = rec.CreatedAt
		out = append(out, d)
	}
	return out, nil
}

// Delete removes the definition named name and cancels its pending
// reactions; an unknown name fails with ErrNotFound.
func (e *Engine) Delete(ctx context.Context, name string) error {
	if err := e.rs.DeleteReactionDefinition(ctx, name, e.now()); err != nil {
		return fmt.Errorf("delete reaction definition %s: %w", name, err)
	}
	e.forgetDefinitions()
	return nil
}

// SyncDefinitions makes e's definitions exactly defs, as package tenancy
// gives every tenant's Engine the project's: it creates those e lacks,
// replaces those whose spec differs (as Put does) and deletes those defs
// lacks, cancelling their pending reactions. A definition it creates
// starts, as Create's do, with the events stored after it was created:
// after its CreatedAt (as read from the Engine it comes from) when that
// was at most a minute ago, so that events stored in e's feed between its
// creation elsewhere and this call still schedule their reactions, else
// (or without CreatedAt) at the head of its feed. Each definition is
// validated as Create does, except that targets are not looked up: every
// connection of a delivery checks its address against the outbound policy
// anyway. It reports whether it changed anything; it tries every
// definition and returns the first error.
func (e *Engine) SyncDefinitions(ctx context.Context, defs []Definition) (changed bool, err error) {
	have, err := e.rs.ReactionDefinitions(ctx)
	if err != nil {
		return false, fmt.Errorf("sync reaction definitions: %w", err)
	}
	byName := make(map[string]storage.ReactionDefinitionRecord, len(have))
	for _, rec := range have {
		byName[rec.Name] = rec
	}
	var first error
	keep := make(map[string]bool, len(defs))
	for _, d := range defs {
		keep[d.Name] = true
		c, err := compile(d, "sync reaction definition", nil)
		if err == nil {
			var did bool
			did, err = e.syncOne(ctx, c, byName)
			changed = changed || did
		}
		if err != nil && first == nil {
			first = fmt.Errorf("sync reaction definition %s: %w", d.Name, err)
		}
	}
	for _, rec := range have {
		if keep[rec.Name] {
			continue
		}
		err := e.rs.DeleteReactionDefinition(ctx, rec.Name, e.now())
		if err == nil {
			changed = true
		} else if !errors.Is(err, eventstore.ErrNotFound) && first == nil {
			first = fmt.Errorf("sync reaction definitions: delete %s: %w", rec.Name, err)
		}
	}
	if changed {
		e.forgetDefinitions()
		wake(e.wakeSched)
	}
	return changed, first
}

// syncOne creates or replaces the definition c in e, given e's stored
// definitions by name, and reports whether it did.
func (e *Engine) syncOne(ctx context.Context, c *compiled, byName map[string]storage.ReactionDefinitionRecord) (bool, error) {
	d := c.def
	old, ok := byName[d.Name]
	if ok && bytes.Equal(old.Spec, c.spec) {
		return false, nil
	}
	if !ok {
		start, err := e.syncStart(ctx, d)
		if err != nil {
			return false, err
		}
		created := d.CreatedAt
		if created.IsZero() {
			created = e.now()
		}
		err = e.rs.CreateReactionDefinition(ctx, storage.ReactionDefinitionRecord{Name: d.Name, Spec: c.spec, CreatedAt: created, Checkpoint: start})
		if errors.Is(err, eventstore.ErrConflict) {
			return false, nil // created meanwhile, by another process syncing it
		}
		return err == nil, err
	}
	var prev Definition
	checkpoint := int64(-1)
	if json.Unmarshal(old.Spec, &prev) != nil || prev.FeedName != d.FeedName {
		var err error
		if checkpoint, err = e.head(ctx, d.FeedName); err != nil {
			return false, err
		}
	}
	if err := e.rs.UpdateReactionDefinition(ctx, d.Name, c.spec, checkpoint); err != nil {
		return false, err
	}
	return true, nil
}

// syncWindow bounds how long after its creation elsewhere a definition
// that SyncDefinitions creates starts from its creation time rather than
// from the feed's head (see SyncDefinitions).
const syncWindow = time.Minute

// syncStart is the checkpoint a definition that SyncDefinitions creates
// starts from: before the first event of its feed recorded at or after
// d.CreatedAt when that was at most syncWindow ago, else the feed's head.
func (e *Engine) syncStart(ctx context.Context, d Definition) (int64, error) {
	head, err := e.head(ctx, d.FeedName)
	if err != nil || d.CreatedAt.IsZero() || e.now().Sub(d.CreatedAt) > syncWindow {
		return head, err
	}
	res, err := e.st.ReadFeed(ctx, d.FeedName, 0, &eventstore.FeedOptions{From: d.CreatedAt, Limit: 1})
	if errors.Is(err, eventstore.ErrNotFound) {
		return head, nil
	}
	if err != nil {
		return 0, err
	}
	if len(res.Entries) == 0 {
		return head, nil
	}
	// Reading after the cursor before the entry's returns the entry: a
	// type's cursors are FeedSequences, strictly increasing.
	return min(head, res.Entries[0].Cursor-1), nil
}

// ForgetAggregate removes every reaction of the aggregate, of every state,
// or of every aggregate of the type when aggregateID is "". Call it after
// eventstore.Store.DeleteAggregate or DeleteAggregateType (the HTTP API
// does): deleting events does not reach reactions by itself.
func (e *Engine) ForgetAggregate(ctx context.Context, aggregateType, aggregateID string) error {
	if err := e.rs.DeleteAggregateReactions(ctx, aggregateType, aggregateID); err != nil {
		return fmt.Errorf("forget reactions of %s/%s: %w", aggregateType, aggregateID, err)
	}
	return nil
}
