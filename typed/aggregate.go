package typed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/eventkit-go/eventstore"
)

// DefaultRetries is how many times Repository.Update decides again after
// a conflict with a concurrent save, unless RepositoryOptions.Retries says
// otherwise.
const DefaultRetries = 3

// Aggregate is an aggregate's state, folded from its events.
type Aggregate[S any] struct {
	ID string // the aggregate's id, within the Repository's aggregate type
	// Version is the aggregate's version that State reflects: the number
	// of saves folded into it, 0 for an aggregate without events.
	Version int64
	State   S // folded by the Repository's apply function from the zero S

	// snapshot is the version of the snapshot State was built from, 0 for
	// none: the next snapshot is due SnapshotEvery saves after it.
	snapshot int64
}

// RepositoryOptions configures a Repository; nil means all defaults.
type RepositoryOptions struct {
	// Retries is how many times Update loads and decides again after a
	// conflict with a concurrent save: 0 means DefaultRetries, a negative
	// number none.
	Retries int
	// Logger receives what does not fail a call but should be known, such
	// as a snapshot that could not be saved or read; nil discards it.
	Logger *slog.Logger

	// SnapshotEvery > 0 turns snapshots on: after a save that brings an
	// aggregate SnapshotEvery or more versions (saves) past the snapshot
	// its state was loaded from (or past version 0), Save saves a
	// snapshot of the aggregate's state, and Load starts from the
	// aggregate's snapshot and folds only the events after it. 0 means no
	// snapshots: Load reads none, Save takes none.
	SnapshotEvery int
	// StateVersion is the version of S's shape in snapshots, at least 0.
	// Bump it when S changes so that a snapshot of the older shape would
	// decode wrong: Load ignores a snapshot of another StateVersion and
	// folds every event, and the next save replaces the snapshot.
	StateVersion int
	// StateCodec encodes S in snapshots; nil means JSONCodec. The state
	// must come back equal through it: with JSON, fields that are not
	// exported are lost, so keep the state in exported fields (or give S
	// MarshalJSON and UnmarshalJSON).
	StateCodec Codec
}

// Repository loads, decides and saves the aggregates of one aggregate
// type, whose state is a value of type S. It is safe for concurrent use.
type Repository[S any] struct {
	st            *Store
	aggregateType string
	apply         func(*S, Event) error
	retries       int
	log           *slog.Logger
	every         int   // snapshot every this many versions; 0: none
	stateVersion  int   // RepositoryOptions.StateVersion
	codec         Codec // of S in snapshots
}

// NewRepository returns a Repository of the aggregates of aggregateType
// in st, whose state is folded from the zero S by apply, called with each
// event in order. apply may be a function or a method expression of S,
// such as (*Order).Apply for
//
//	func (o *Order) Apply(e typed.Event) error
//
// It returns an error to make the load fail (an event the state cannot
// take); an event type it does not know it may ignore. It changes only the
// state it is given, and must not depend on anything but the state and
// the event, so that every load builds the same state.
func NewRepository[S any](st *Store, aggregateType string, apply func(state *S, e Event) error, opts *RepositoryOptions) *Repository[S] {
	var o RepositoryOptions
	if opts != nil {
		o = *opts
	}
	r := &Repository[S]{st: st, aggregateType: aggregateType, apply: apply, retries: o.Retries, log: o.Logger,
		every: max(o.SnapshotEvery, 0), stateVersion: o.StateVersion, codec: o.StateCodec}
	if r.codec == nil {
		r.codec = JSONCodec{}
	}
	if r.retries == 0 {
		r.retries = DefaultRetries
	}
	r.retries = max(r.retries, 0)
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

// AggregateType returns the aggregate type of r's aggregates.
func (r *Repository[S]) AggregateType() string { return r.aggregateType }

// Load returns the aggregate id, its state folded from its events (from
// its snapshot on, with snapshots on). An aggregate without events is no
// error: it comes back at Version 0 with the zero state, ready for a first
// save. Load fails when an event does not decode (a *CodecError) or apply
// fails (apply's error, wrapped with the event's id and type). A snapshot
// that cannot be read or decoded is logged and ignored: Load folds every
// event instead.
func (r *Repository[S]) Load(ctx context.Context, id string) (Aggregate[S], error) {
	if r.apply == nil {
		return Aggregate[S]{ID: id}, fmt.Errorf("typed: load %s/%s: the Repository has no apply function: %w", r.aggregateType, id, eventstore.ErrInvalid)
	}
	agg := Aggregate[S]{ID: id}
	if r.every > 0 {
		r.fromSnapshot(ctx, &agg)
	}
	err := r.fold(ctx, &agg)
	if errors.Is(err, errBehind) {
		// The aggregate was deleted and saved again since the snapshot
		// was read: fold its events from the first.
		agg = Aggregate[S]{ID: id}
		err = r.fold(ctx, &agg)
	}
	switch {
	case errors.Is(err, errNoEvents):
		return Aggregate[S]{ID: id}, nil
	case err != nil:
		return Aggregate[S]{ID: id}, err
	}
	return agg, nil
}

// fold applies the events after agg.Version to agg.
func (r *Repository[S]) fold(ctx context.Context, agg *Aggregate[S]) error {
	for {
		page, more, err := r.st.st.LoadRange(ctx, r.aggregateType, agg.ID, agg.Version, loadPage)
		switch {
		case errors.Is(err, eventstore.ErrNotFound):
			return errNoEvents
		case err != nil:
			return fmt.Errorf("load %s/%s: %w", r.aggregateType, agg.ID, err)
		case page.Version < agg.Version:
			return errBehind
		}
		for _, e := range page.Events {
			ev, err := r.st.reg.Decode(e)
			if err != nil {
				return fmt.Errorf("load %s/%s: %w", r.aggregateType, agg.ID, err)
			}
			if err := r.apply(&agg.State, ev); err != nil {
				return fmt.Errorf("load %s/%s: apply event %s of type %q (version %d): %w", r.aggregateType, agg.ID, ev.ID, ev.Type, ev.Version, err)
			}
			agg.Version = ev.Version
		}
		if !more || len(page.Events) == 0 {
			return nil
		}
	}
}

// Save saves events (values of registered types, or NewEvents holding
// them) to the aggregate, expecting it to be still at agg.Version: when
// another save came first it fails with an error wrapping
// eventstore.ErrConflict (a *eventstore.ConflictError) and nothing is
// saved. No events save nothing and return agg.Version. Save does not
// change agg; load again for the state after the save.
//
// With snapshots on, a save that brings the aggregate SnapshotEvery
// versions past agg's snapshot loads the aggregate again and saves a
// snapshot of its state; a failure there is logged, never the save's
// error (the events are saved, and a later save tries again).
func (r *Repository[S]) Save(ctx context.Context, agg Aggregate[S], events []any) (eventstore.SaveResult, error) {
	if len(events) == 0 {
		return eventstore.SaveResult{Version: agg.Version}, nil
	}
	res, err := r.st.Save(ctx, r.aggregateType, agg.ID, events, &SaveOptions{ExpectedVersion: eventstore.ExpectVersion(agg.Version)})
	if err == nil && r.every > 0 && res.Version-agg.snapshot >= int64(r.every) {
		r.takeSnapshot(ctx, agg.ID)
	}
	return res, err
}

// Update is Load, decide and Save in one call, retried on conflicts: it
// loads the aggregate id, calls decide with its state, and saves the
// events decide returns at the version loaded. When a concurrent save
// came first it loads again and calls decide again, up to
// RepositoryOptions.Retries times; then it fails with an error wrapping
// eventstore.ErrConflict. decide's error is returned unchanged, with
// nothing saved; no events save nothing. Other errors come back at once,
// eventstore.ErrUnavailable too: the save's outcome is then unknown, and
// deciding again could save the command twice (give the events ids with
// NewEvent to make a retry of your own idempotent).
//
// decide sees the state as loaded; what it changes in it is not kept
// (only events change state). It may be called several times, so it must
// do nothing it could not do again, or undo.
func (r *Repository[S]) Update(ctx context.Context, id string, decide func(state *S) ([]any, error)) (eventstore.SaveResult, error) {
	for attempt := 0; ; attempt++ {
		agg, err := r.Load(ctx, id)
		if err != nil {
			return eventstore.SaveResult{}, err
		}
		events, err := decide(&agg.State)
		if err != nil {
			return eventstore.SaveResult{}, err
		}
		res, err := r.Save(ctx, agg, events)
		if err == nil || !errors.Is(err, eventstore.ErrConflict) {
			return res, err
		}
		if attempt >= r.retries {
			return res, fmt.Errorf("update %s/%s: %d attempts: %w", r.aggregateType, id, attempt+1, err)
		}
		if ctx.Err() != nil {
			return res, err
		}
	}
}

// Fold outcomes that are not errors of Load.
var (
	errNoEvents = errors.New("typed: no events")                            // the aggregate has none
	errBehind   = errors.New("typed: the aggregate is behind its snapshot") // deleted and saved again
)
