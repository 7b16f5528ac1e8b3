package storage

import (
	"context"
	"encoding/json"
	"slices"
	"time"
)

// ReactionStorage is implemented by a Storage that can keep reactions:
// reaction definitions with their checkpoints in a feed, and the reactions
// they schedule, durably, so that package reactions can deliver each one
// once, on time, across restarts and across processes sharing the
// database. It is optional: a Storage without it cannot run reactions.
// The memory, SQLite and PostgreSQL backends implement it; backends prove
// it with storage/storagetest.Run, which runs its cases whenever the
// Storage implements it.
//
// As for Storage, every method may be called concurrently, slices passed in
// belong to the caller, slices returned to the caller, a missing item wraps
// ErrNotFound, and after Close every method wraps ErrClosed. Times are
// stored with microsecond precision and returned in UTC; the zero time is
// kept as the zero time.
type ReactionStorage interface {
	// CreateReactionDefinition stores a new definition with its
	// Checkpoint as given (the head of its feed when it was created, so
	// that earlier events never fire). A definition of that name wraps
	// ErrConflict.
	CreateReactionDefinition(ctx context.Context, def ReactionDefinitionRecord) error

	// UpdateReactionDefinition replaces the Spec of the definition named
	// name with spec and, when checkpoint >= 0, sets its checkpoint to it
	// (a definition that now reads another feed starts at that feed's
	// head); checkpoint < 0 keeps the stored one. An unknown name wraps
	// ErrNotFound. ScheduleReactions with the old Spec is refused
	// afterwards.
	UpdateReactionDefinition(ctx context.Context, name string, spec []byte, checkpoint int64) error

	// ReactionDefinition returns the definition named name.
	ReactionDefinition(ctx context.Context, name string) (ReactionDefinitionRecord, error)

	// ReactionDefinitions returns every definition, ordered by name.
	ReactionDefinitions(ctx context.Context) ([]ReactionDefinitionRecord, error)

	// DeleteReactionDefinition removes the definition named name and, in
	// the same atomic step, cancels its pending reactions (state
	// ReactionPending) with FinishedAt at. Reactions in other states are
	// kept. An unknown name wraps ErrNotFound.
	DeleteReactionDefinition(ctx context.Context, name string, at time.Time) error

	// ScheduleReactions atomically moves the checkpoint of definition
	// s.Definition from s.From to s.To, cancels (state ReactionCanceled,
	// FinishedAt s.At) the definition's pending reactions of the
	// aggregates in s.Cancel, then inserts s.Insert. When the stored
	// checkpoint is not s.From or the stored Spec is not s.Spec (another
	// process got there first, or the definition changed), it writes
	// nothing and wraps ErrConflict; an unknown definition wraps
	// ErrNotFound. This compare-and-set makes each event of the feed
	// schedule once, however many processes follow it.
	ScheduleReactions(ctx context.Context, s ReactionSchedule) error

	// ClaimReactions atomically claims at most c.Limit reactions that are
	// due: pending ones with DueAt <= c.Now, and ongoing ones whose lease
	// ended (DueAt <= c.Now: their process died or gave up), earliest
	// DueAt first. Each claimed reaction becomes ReactionOngoing with
	// DueAt c.Until (the end of the lease), Claim c.Claim and Attempts
	// raised by one, and is returned so. Two concurrent calls never claim
	// the same reaction. Backends serve it from an index on DueAt of the
	// pending and ongoing reactions, without reading the others.
	ClaimReactions(ctx context.Context, c ReactionClaim) ([]Reaction, error)

	// FinishReactions records the outcomes of attempts, in one atomic
	// step for all of them (so that a backend commits once for many
	// deliveries): for each o whose reaction o.ID is ongoing under the
	// claim o.Claim, it becomes o.State (ReactionCompleted,
	// ReactionFailed or ReactionCanceled, with FinishedAt o.At, or
	// ReactionPending again with DueAt o.DueAt for a retry) with
	// LastError o.Error. Any other outcome (the lease ended and another
	// claimed it, or it was cancelled or executed anew meanwhile) writes
	// nothing, and its entry of errs wraps ErrConflict (ErrNotFound for an
	// unknown id); errs[i] belongs to outcomes[i], nil when applied. err
	// reports a failure of the whole step, which then wrote nothing.
	FinishReactions(ctx context.Context, outcomes []ReactionOutcome) (errs []error, err error)

	// Reaction returns the reaction with id.
	Reaction(ctx context.Context, id string) (Reaction, error)

	// ListReactions returns the reactions q selects, ordered by TriggerAt
	// then ID, paged by q.Skip and q.Limit, and the number of all that
	// match. Payload is left empty.
	ListReactions(ctx context.Context, q ReactionQuery) (ReactionList, error)

	// CancelReaction makes the pending reaction id ReactionCanceled with
	// FinishedAt at. A reaction that is not pending wraps ErrConflict; an
	// unknown id ErrNotFound.
	CancelReaction(ctx context.Context, id string, at time.Time) error

	// ExecuteReaction makes reaction id pending and due at now, with
	// Attempts 0, no FinishedAt, claim or error, whatever its state,
	// unless it is ongoing under a lease that has not ended (DueAt >
	// now): that wraps ErrConflict. An unknown id wraps ErrNotFound.
	ExecuteReaction(ctx context.Context, id string, now time.Time) error

	// DeleteAggregateReactions removes every reaction of the aggregate
	// (aggregateType, aggregateID), of every state, or of every aggregate
	// of the type when aggregateID is "". Removing none is not an error.
	DeleteAggregateReactions(ctx context.Context, aggregateType, aggregateID string) error

	// NextReactionDue returns the earliest DueAt of the pending and
	// ongoing reactions, and false when there is none.
	NextReactionDue(ctx context.Context) (time.Time, bool, error)
}

// ReactionDefinitionRecord is a reaction definition as a ReactionStorage
// keeps it.
type ReactionDefinitionRecord struct {
	// Name is the definition's name.
	Name string
	// Spec is the definition, encoded by package reactions; backends store
	// it as opaque bytes.
	Spec json.RawMessage
	// CreatedAt is when the definition was created.
	CreatedAt time.Time
	// Checkpoint is the FeedSequence of the definition's feed up to which
	// events have been scheduled.
	Checkpoint int64
}

// ReactionState is the stored state of a reaction.
type ReactionState uint8

// States of a reaction. Pending and ongoing reactions are the active ones
// that ClaimReactions considers.
const (
	// ReactionPending waits for DueAt (its trigger time, or the time of
	// its next attempt).
	ReactionPending ReactionState = iota
	// ReactionOngoing is claimed by a process until DueAt.
	ReactionOngoing
	// ReactionCompleted was delivered.
	ReactionCompleted
	// ReactionCanceled was cancelled before it was delivered.
	ReactionCanceled
	// ReactionFailed was attempted as often as allowed, or could not be
	// scheduled.
	ReactionFailed
)

// Reaction is one scheduled call of a reaction definition for one event.
type Reaction struct {
	// ID identifies the reaction (a UUID).
	ID string
	// Definition is the name of the definition that scheduled it.
	Definition string
	// AggregateType, AggregateID, EventID and EventType identify the event
	// that scheduled it.
	AggregateType, AggregateID, EventID, EventType string
	// State is the reaction's state.
	State ReactionState
	// CreatedAt is when it was scheduled; TriggerAt when it was due first.
	CreatedAt, TriggerAt time.Time
	// DueAt is when a pending reaction is attempted next, or when the
	// lease of an ongoing one ends.
	DueAt time.Time
	// FinishedAt is when it completed, failed or was cancelled; zero
	// while it is active.
	FinishedAt time.Time
	// Attempts counts the attempts started since it was scheduled (or
	// executed anew).
	Attempts int
	// Claim is the token of the claim of an ongoing reaction.
	Claim string
	// LastError says why the last attempt failed, or "".
	LastError string
	// Payload is the event as the action receives it (JSON), at most
	// MaxReactionPayload bytes.
	Payload json.RawMessage
}

// MaxReactionPayload bounds Reaction.Payload.
const MaxReactionPayload = 1 << 20

// ReactionSchedule is the input of ReactionStorage.ScheduleReactions.
type ReactionSchedule struct {
	// Definition is the definition whose checkpoint moves; Spec its Spec
	// as the scheduler read it.
	Definition string
	Spec       []byte
	// From is the checkpoint read; To the new one.
	From, To int64
	// Cancel lists the aggregate ids whose pending reactions of the
	// definition are cancelled, before Insert is inserted.
	Cancel []string
	// Insert are the new reactions, each ReactionPending (or
	// ReactionFailed when it could not be scheduled) with distinct IDs.
	Insert []Reaction
	// At is the FinishedAt of the cancelled reactions.
	At time.Time
}

// ReactionClaim is the input of ReactionStorage.ClaimReactions.
type ReactionClaim struct {
	// Now is the current time; Until the end of the lease.
	Now, Until time.Time
	// Claim is a token unique to this claim.
	Claim string
	// Limit is the most reactions claimed, at least 1.
	Limit int
}

// ReactionOutcome is one input of ReactionStorage.FinishReactions.
type ReactionOutcome struct {
	// ID and Claim identify the reaction and the claim it is under.
	ID, Claim string
	// State is ReactionCompleted, ReactionFailed, ReactionCanceled or
	// ReactionPending.
	State ReactionState
	// DueAt is the time of the next attempt when State is
	// ReactionPending.
	DueAt time.Time
	// At is the FinishedAt of a completed or failed reaction.
	At time.Time
	// Error is the reason of a failed attempt, or "".
	Error string
}

// ReactionQuery selects reactions for ReactionStorage.ListReactions. Zero
// fields do not restrict.
type ReactionQuery struct {
	// States, when not empty, keeps the reactions in one of them.
	States []ReactionState
	// DueBefore, when not zero, keeps the reactions whose DueAt is at or
	// before it; DueAfter those whose DueAt is after it. Together with
	// ReactionPending they tell due from not yet due reactions.
	DueBefore, DueAfter time.Time
	// Definition, AggregateID and EventID keep the reactions with that
	// value.
	Definition, AggregateID, EventID string
	// From and To keep the reactions whose TriggerAt lies within [From,
	// To].
	From, To time.Time
	// Skip reactions are left out, then at most Limit returned (0: none,
	// only Total).
	Skip, Limit int
}

// ReactionList is the result of ReactionStorage.ListReactions.
type ReactionList struct {
	// Reactions are the page, ordered by TriggerAt then ID.
	Reactions []Reaction
	// Total counts every reaction that matches.
	Total int64
}

// Matches reports whether q selects r, for backends that filter by
// scanning.
func (q *ReactionQuery) Matches(r *Reaction) bool {
	switch {
	case len(q.States) > 0 && !slices.Contains(q.States, r.State),
		!q.DueBefore.IsZero() && r.DueAt.After(q.DueBefore),
		!q.DueAfter.IsZero() && !r.DueAt.After(q.DueAfter),
		q.Definition != "" && r.Definition != q.Definition,
		q.AggregateID != "" && r.AggregateID != q.AggregateID,
		q.EventID != "" && r.EventID != q.EventID,
		!q.From.IsZero() && r.TriggerAt.Before(q.From),
		!q.To.IsZero() && r.TriggerAt.After(q.To):
		return false
	}
	return true
}
