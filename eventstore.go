package eventstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventkit-go/eventstore/internal/jsonscan"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/names"
	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/storage"
	"go.opentelemetry.io/otel/trace"
)

// Options configures a Store; nil means all defaults.
type Options struct {
	Now    func() time.Time // stamps RecordedAt; the default is time.Now
	Logger *slog.Logger     // diagnostics of the Store and its Projectors; nil discards them
	// PollInterval is how often feed readers and projectors look for
	// saves the storage does not report (other processes'); 1 s when 0.
	PollInterval time.Duration
	Metrics      Metrics // when set, receives the Store's figures
	// MaxReadBytes caps the event data of a page the Store reads (at
	// least one save): 1 MiB when 0, none when negative.
	MaxReadBytes int64
	// TracerProvider receives the spans (docs/tracing.md); nil follows
	// OpenTelemetry's global provider.
	TracerProvider trace.TracerProvider
}

func (o *Options) tracer() *tracing.Tracer {
	if o == nil {
		return tracing.New(nil)
	}
	return tracing.New(o.TracerProvider)
}

func (o *Options) maxReadBytes() int64 {
	switch {
	case o == nil || o.MaxReadBytes == 0:
		return limits.DefaultMaxReadBytes
	case o.MaxReadBytes < 0:
		return 0
	}
	return o.MaxReadBytes
}

func (o *Options) now() func() time.Time {
	if o == nil || o.Now == nil {
		return time.Now
	}
	return o.Now
}

func (o *Options) logger() *slog.Logger {
	if o == nil || o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// SaveOptions are optional arguments of Store.Save; nil means none.
type SaveOptions struct {
	ExpectedVersion VersionCheck // when set, the version the aggregate must be at
}

// Store saves events to aggregates, loads them and reads feeds. It is
// safe for concurrent use. Create one with New.
type Store struct {
	storage storage.Storage
	now     func() time.Time
	log     *slog.Logger
	// readBytes is Options.MaxReadBytes, 0 for no cap.
	readBytes int64

	// lastPos is the highest position this Store has saved or seen saved
	// (including duplicates): projectors wait for it to give read-your-writes.
	lastPos atomic.Int64
	closed  atomic.Bool
	// full is set when a write failed with ErrFull and cleared by the
	// next write that succeeds (OutOfSpace).
	full atomic.Bool
	// deletions counts deletions of events, twice each (before and after
	// they reset projections), so that feed pages read before one are not
	// reused after it; deleting counts those in progress (see catchUp).
	deletions atomic.Int64
	deleting  atomic.Int64

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on a save after watch
	watched atomic.Bool   // someone holds changed

	// requests recycles the event slices of storage requests (*[]Event):
	// a Storage retains nothing of a request once Append returns.
	requests sync.Pool

	bg background // wake-ups across processes, running projectors (wake.go)

	// rewinder is the storage as a storage.Rewinder, or nil; rewinds
	// counts the rewinds found, lastRewind is the latest (rewind.go).
	rewinder   storage.Rewinder
	prober     storage.WriteProber // the storage's, or nil
	rewinds    atomic.Int64
	lastRewind atomic.Pointer[storage.Rewind]
	tracer     *tracing.Tracer // spans of the Store and its Projectors (trace.go)
}

// New returns a Store on top of s. The Store takes ownership of s: Close
// closes it.
func New(s storage.Storage, opts *Options) (*Store, error) {
	if s == nil {
		return nil, fmt.Errorf("eventstore: new: nil Storage: %w", ErrInvalid)
	}
	st := &Store{
		storage:   meter(s, opts.metrics()),
		now:       opts.now(),
		log:       opts.logger(),
		changed:   make(chan struct{}),
		bg:        background{poll: opts.pollInterval()},
		readBytes: opts.maxReadBytes(),
		tracer:    opts.tracer(),
	}
	st.watchRewinds(s)
	return st, nil
}

// Save appends events to the aggregate atomically, creating it on its
// first save, and raises its version by one; opts.ExpectedVersion makes it
// fail with a *ConflictError unless the aggregate is at that version.
// Saves are idempotent per event id: a retry whose events are all stored
// returns the earlier result with Duplicate set; a batch mixing stored and
// new ids is a *ConflictError. Invalid input (more than 10,000 events,
// data that is not a JSON object or nests deeper than 64 levels, an id
// that is not a UUID) is a *ValidationError naming the event and field.
func (s *Store) Save(ctx context.Context, aggregateType, aggregateID string, events []NewEvent, opts *SaveOptions) (res SaveResult, err error) {
	var span tracing.Span
	if s.tracer.Enabled() { // inlined: no call while nothing traces
		ctx, span = s.tracer.Start(ctx, spanSave, trace.SpanKindInternal)
		defer func() { endSave(span, aggregateType, len(events), res, err) }()
	}
	buf := s.eventBuffer(len(events))
	defer s.recycle(buf, len(events))
	var into []Event
	if buf != nil {
		into = *buf
	}
	req, err := s.prepare(aggregateType, aggregateID, events, opts, into, time.Time{})
	if err != nil {
		return SaveResult{}, err
	}
	if s.closed.Load() {
		return SaveResult{}, fmt.Errorf("save %s/%s: %w", aggregateType, aggregateID, ErrClosed)
	}
	if span.Started() {
		stampTrace(ctx, req.Events)
	}
	r, err := s.storage.Append(ctx, req)
	s.noteWrite(err)
	if err != nil {
		return SaveResult{}, fmt.Errorf("save %s/%s: %w", aggregateType, aggregateID, err)
	}
	s.observe(r.Position)
	return SaveResult(r), nil
}

// noteWrite records the outcome of a write to the storage for OutOfSpace.
func (s *Store) noteWrite(err error) {
	switch {
	case err == nil:
		if s.full.Load() {
			s.full.Store(false)
		}
	case errors.Is(err, ErrFull):
		if !s.full.Load() {
			s.log.Error("eventstore: the storage is out of space; saves fail until space is freed", "err", err)
			s.full.Store(true)
		}
	}
}

// OutOfSpace reports whether the Store's latest write (a save or a
// projection commit) failed with ErrFull; a readiness check can report it.
func (s *Store) OutOfSpace() bool {
	return s.full.Load()
}

// maxRecycled bounds the batches whose event slices are recycled, so that
// the pool holds no large slices.
const maxRecycled = 64

// eventBuffer returns a slice of maxRecycled events for a storage request
// of n events, recycled; nil when n is larger (prepare allocates).
func (s *Store) eventBuffer(n int) *[]Event {
	if n > maxRecycled {
		return nil
	}
	if b, ok := s.requests.Get().(*[]Event); ok {
		return b
	}
	b := make([]Event, maxRecycled)
	return &b
}

// recycle clears the first n events of b, which no storage request refers
// to any longer, so that it keeps none of the caller's data alive, and
// returns it to the pool.
func (s *Store) recycle(b *[]Event, n int) {
	if b != nil {
		clear((*b)[:n])
		s.requests.Put(b)
	}
}

// prepare validates a save and builds the storage request, with its events
// at the start of into when it is long enough, recorded at at (now when
// at is zero; SaveImported checks it before).
func (s *Store) prepare(aggregateType, aggregateID string, events []NewEvent, opts *SaveOptions, into []Event, at time.Time) (storage.AppendRequest, error) {
	v := validation{op: "save"}
	checkFeedName(&v, "aggregateType", aggregateType)
	checkName(&v, "aggregateId", aggregateID)
	switch {
	case len(events) == 0:
		v.add("events", "at least one event is required")
	case len(events) > limits.MaxEventsPerSave:
		v.add("events", "at most %d events are allowed in one save, got %d", limits.MaxEventsPerSave, len(events))
		return storage.AppendRequest{}, v.err()
	}
	req := storage.AppendRequest{AggregateType: aggregateType, AggregateID: aggregateID}
	if opts != nil {
		req.ExpectedVersion = opts.ExpectedVersion
		if n, ok := opts.ExpectedVersion.Version(); ok && n < 0 {
			v.add("expectedVersion", "must not be negative, got %d", n)
		}
	}
	now := at.UTC().Truncate(time.Microsecond)
	if at.IsZero() {
		now = s.now().UTC().Truncate(time.Microsecond)
	}
	if len(into) >= len(events) {
		req.Events = into[:len(events):len(events)]
	} else {
		req.Events = make([]Event, len(events))
	}
	var seen map[string]int // for large batches; small ones scan
	if len(events) > 16 {
		seen = make(map[string]int, len(events))
	}
	typeOK := false // events[i-1].Type is acceptable
	for i := range events {
		e := &events[i] // not copied: a NewEvent is 112 bytes
		id, ok := normalizeUUID(e.ID)
		switch {
		case e.ID == "":
			v.add(fmt.Sprintf("events[%d].eventId", i), "is required")
		case !ok:
			v.add(fmt.Sprintf("events[%d].eventId", i), "must be a UUID such as 123e4567-e89b-12d3-a456-426614174000, got %q", clip(e.ID))
		default:
			if j := indexOf(seen, req.Events[:i], id); j >= 0 {
				v.add(fmt.Sprintf("events[%d].eventId", i), "repeats the id of events[%d]", j)
			}
			if seen != nil {
				seen[id] = i
			}
		}
		// A batch mostly repeats one type: checked once is enough.
		if typeOK = typeOK && e.Type == events[i-1].Type; !typeOK {
			if msg := names.TypeProblem(e.Type); msg != "" {
				v.add(fmt.Sprintf("events[%d].eventType", i), "%s", msg)
			} else {
				typeOK = true
			}
		}
		if e.EncryptedData != "" { // mostly none
			if msg := encryptedProblem(e.EncryptedData); msg != "" {
				v.add(fmt.Sprintf("events[%d].encryptedData", i), "%s", msg)
			}
		}
		if !e.Metadata.IsZero() { // mostly none
			checkEventMetadata(&v, fmt.Sprintf("events[%d].metadata", i), &e.Metadata)
		}
		data, msg := checkData(e.Data)
		if msg != "" {
			v.add(fmt.Sprintf("events[%d].data", i), "%s", msg)
		}
		// data still belongs to the caller: Storage copies what it keeps
		// and retains nothing after Append returns.
		req.Events[i] = Event{
			ID: id, Type: e.Type, Data: data, EncryptedData: e.EncryptedData, Metadata: e.Metadata,
			AggregateType: aggregateType, AggregateID: aggregateID,
			RecordedAt: now,
		}
	}
	if err := v.err(); err != nil {
		return storage.AppendRequest{}, err
	}
	return req, nil
}

// indexOf returns the index of the event with id among prev, or -1.
func indexOf(seen map[string]int, prev []Event, id string) int {
	if seen != nil {
		if j, ok := seen[id]; ok {
			return j
		}
		return -1
	}
	for j := range prev {
		if prev[j].ID == id {
			return j
		}
	}
	return -1
}

// checkData returns the data to store (nil for none) or a message saying
// why it is not acceptable.
func checkData(d []byte) ([]byte, string) {
	i := 0
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	if i == len(d) {
		return nil, ""
	}
	if err := jsonscan.Check(d, limits.MaxDataDepth); err != nil {
		if errors.Is(err, jsonscan.ErrDepth) {
			return nil, fmt.Sprintf("nests deeper than %d levels", limits.MaxDataDepth)
		}
		return nil, "is not valid JSON"
	}
	switch d[i] {
	case '{':
		return d, ""
	case 'n':
		return nil, "" // null: no data
	}
	return nil, "must be a JSON object"
}

// hexClass classifies bytes for normalizeUUID: 0 for lower-case hex digits,
// hexUpper for upper-case ones, hexBad for anything else.
var hexClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			t[c] = hexUpper
		default:
			t[c] = hexBad
		}
	}
	return t
}()

const (
	hexUpper = 1
	hexBad   = 2
)

// normalizeUUID accepts a UUID in the canonical 8-4-4-4-12 hexadecimal
// form and returns it in lower case.
func normalizeUUID(s string) (string, bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return "", false
	}
	var acc uint8
	for _, part := range [...]string{s[0:8], s[9:13], s[14:18], s[19:23], s[24:36]} {
		for i := 0; i < len(part); i++ {
			acc |= hexClass[part[i]]
		}
	}
	switch {
	case acc&hexBad != 0:
		return "", false
	case acc&hexUpper != 0:
		return strings.ToLower(s), true
	}
	return s, true
}

// Load returns the aggregate with all its events, or ErrNotFound.
func (s *Store) Load(ctx context.Context, aggregateType, aggregateID string) (agg Aggregate, err error) {
	var span tracing.Span
	if s.tracer.Enabled() { // inlined: no call while nothing traces
		ctx, span = s.tracer.Start(ctx, spanLoad, trace.SpanKindInternal)
		defer func() { endLoad(span, aggregateType, agg, err) }()
	}
	v := validation{op: "load"}
	checkName(&v, "aggregateType", aggregateType)
	checkName(&v, "aggregateId", aggregateID)
	if err := v.err(); err != nil {
		return Aggregate{}, err
	}
	if s.closed.Load() {
		return Aggregate{}, fmt.Errorf("load %s/%s: %w", aggregateType, aggregateID, ErrClosed)
	}
	agg, err = s.storage.Load(ctx, storage.LoadQuery{AggregateType: aggregateType, AggregateID: aggregateID})
	if err != nil {
		return Aggregate{}, wrapNotFound(fmt.Sprintf("aggregate %s/%s", aggregateType, aggregateID), err)
	}
	return agg, nil
}

// Close closes the Store and its Storage; Projectors made from it stop
// working. Calling it again does nothing.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.stopBackground()
	if err := s.storage.Close(); err != nil && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("eventstore: close: %w", err)
	}
	return nil
}

// observe records that position p is saved and wakes projectors.
func (s *Store) observe(p int64) {
	for {
		cur := s.lastPos.Load()
		if p <= cur || s.lastPos.CompareAndSwap(cur, p) {
			break
		}
	}
	// A watcher that set watched after this load runs its catch-up after
	// this save is visible, so it misses nothing.
	if !s.watched.Load() {
		return
	}
	s.mu.Lock()
	if s.watched.Load() {
		close(s.changed)
		s.changed = make(chan struct{})
		s.watched.Store(false)
	}
	s.mu.Unlock()
}

// watch returns a channel that is closed at the next save or at Close.
func (s *Store) watch() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watched.Store(true)
	return s.changed
}

// checkName validates an aggregate type or id with the rule of names.Check.
func checkName(v *validation, field, s string) {
	if msg := names.Problem(s); msg != "" {
		v.add(field, "%s", msg)
	}
}

// checkFeedName validates an aggregate type or a feed name with the rule
// of names.CheckFeed.
func checkFeedName(v *validation, field, s string) {
	if msg := names.FeedProblem(s); msg != "" {
		v.add(field, "%s", msg)
	}
}
