package reactions

import (
	"context"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

// Status is the state of a reaction as users see it.
type Status string

// Statuses of a reaction.
const (
	// StatusScheduled: pending, not due yet.
	StatusScheduled Status = "SCHEDULED"
	// StatusReady: pending and due, waiting for a free worker.
	StatusReady Status = "READY"
	// StatusOngoing: being attempted by a process.
	StatusOngoing Status = "ONGOING"
	// StatusCompleted: delivered.
	StatusCompleted Status = "COMPLETED"
	// StatusCanceled: cancelled before delivery.
	StatusCanceled Status = "CANCELED"
	// StatusFailed: every attempt failed, or it could not be scheduled.
	StatusFailed Status = "FAILED"
)

// Reaction is one scheduled call of a definition for one event.
type Reaction struct {
	// ID identifies the reaction (a UUID).
	ID string `json:"reactionId"`
	// Name is the definition's name.
	Name string `json:"reactionName"`
	// AggregateType, AggregateID, EventID and EventType name the event
	// that scheduled it.
	AggregateType string `json:"aggregateType"`
	AggregateID   string `json:"aggregateId"`
	EventID       string `json:"eventId"`
	EventType     string `json:"eventType"`
	// Status is its state.
	Status Status `json:"status"`
	// CreatedAt is when it was scheduled, TriggerAt when it was first due,
	// FinishedAt when it completed, failed or was cancelled (zero before).
	CreatedAt  time.Time `json:"-"`
	TriggerAt  time.Time `json:"-"`
	FinishedAt time.Time `json:"-"`
	// Attempts counts the attempts started.
	Attempts int `json:"attempts"`
	// LastError says why the last attempt failed.
	LastError string `json:"lastError,omitempty"`
}

// reaction converts a stored reaction, telling due from not due with now.
func reaction(r *storage.Reaction, now time.Time) Reaction {
	out := Reaction{ID: r.ID, Name: r.Definition, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
		EventID: r.EventID, EventType: r.EventType, CreatedAt: r.CreatedAt, TriggerAt: r.TriggerAt,
		FinishedAt: r.FinishedAt, Attempts: r.Attempts, LastError: r.LastError}
	switch r.State {
	case storage.ReactionPending:
		out.Status = StatusScheduled
		if !r.DueAt.After(now) {
			out.Status = StatusReady
		}
	case storage.ReactionOngoing:
		out.Status = StatusOngoing
	case storage.ReactionCompleted:
		out.Status = StatusCompleted
	case storage.ReactionCanceled:
		out.Status = StatusCanceled
	default:
		out.Status = StatusFailed
	}
	return out
}

// ListOptions select and page the reactions of Engine.Reactions. Zero
// fields do not restrict.
type ListOptions struct {
	// Status keeps the reactions of that status; "" or "ALL" keeps all.
	Status Status
	// Name, AggregateID and EventID keep the reactions with that value.
	Name, AggregateID, EventID string
	// From and To keep the reactions whose trigger time lies within them.
	From, To time.Time
	// Skip reactions are left out (at most MaxSkip), then at most Limit
	// returned (DefaultLimit when 0, at most MaxLimit; a negative Limit
	// returns none, only Total).
	Skip, Limit int
}

// Bounds of ListOptions.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	MaxSkip      = 1 << 30
)

// Page is a page of reactions.
type Page struct {
	// Reactions are ordered by trigger time, then id.
	Reactions []Reaction
	// HasMore reports that reactions after the page match.
	HasMore bool
	// Total counts every reaction that matches.
	Total int64
}

// Reactions lists the reactions opts selects.
func (e *Engine) Reactions(ctx context.Context, opts ListOptions) (Page, error) {
	now := e.now()
	q := storage.ReactionQuery{Definition: opts.Name, AggregateID: opts.AggregateID, EventID: opts.EventID,
		From: opts.From, To: opts.To, Skip: opts.Skip, Limit: opts.Limit}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultLimit
	case q.Limit < 0:
		q.Limit = 0
	}
	if q.Skip < 0 || q.Skip > MaxSkip || q.Limit > MaxLimit {
		return Page{}, &eventstore.ValidationError{Op: "list reactions", Fields: []eventstore.FieldError{
			{Field: "skip/limit", Message: fmt.Sprintf("skip must be in [0, %d] and limit in [0, %d]", MaxSkip, MaxLimit)}}}
	}
	switch opts.Status {
	case "", "ALL":
	case StatusScheduled:
		q.States, q.DueAfter = []storage.ReactionState{storage.ReactionPending}, now
	case StatusReady:
		q.States, q.DueBefore = []storage.ReactionState{storage.ReactionPending}, now
	case StatusOngoing:
		q.States = []storage.ReactionState{storage.ReactionOngoing}
	case StatusCompleted:
		q.States = []storage.ReactionState{storage.ReactionCompleted}
	case StatusCanceled:
		q.States = []storage.ReactionState{storage.ReactionCanceled}
	case StatusFailed:
		q.States = []storage.ReactionState{storage.ReactionFailed}
	default:
		return Page{}, &eventstore.ValidationError{Op: "list reactions", Fields: []eventstore.FieldError{
			{Field: "status", Message: "must be one of SCHEDULED, READY, ONGOING, COMPLETED, CANCELED, FAILED, ALL"}}}
	}
	list, err := e.rs.ListReactions(ctx, q)
	if err != nil {
		return Page{}, fmt.Errorf("list reactions: %w", err)
	}
	p := Page{Reactions: make([]Reaction, 0, len(list.Reactions)), Total: list.Total}
	for i := range list.Reactions {
		p.Reactions = append(p.Reactions, reaction(&list.Reactions[i], now))
	}
	p.HasMore = int64(q.Skip+len(p.Reactions)) < list.Total
	return p, nil
}

// Reaction returns the reaction with id, or an error wrapping ErrNotFound.
func (e *Engine) Reaction(ctx context.Context, id string) (Reaction, error) {
	r, err := e.rs.Reaction(ctx, id)
	if err != nil {
		return Reaction{}, fmt.Errorf("reaction %s: %w", id, err)
	}
	return reaction(&r, e.now()), nil
}

// Cancel cancels the pending reaction id. One that is not pending fails
// with ErrConflict, an unknown id with ErrNotFound.
func (e *Engine) Cancel(ctx context.Context, id string) error {
	if err := e.rs.CancelReaction(ctx, id, e.now()); err != nil {
		return fmt.Errorf("cancel reaction %s: %w", id, err)
	}
	return nil
}

// Execute makes reaction id due now, whatever its state (a finished one
// runs again, with a fresh count of attempts), unless it is being
// attempted (ErrConflict). An unknown id fails with ErrNotFound.
func (e *Engine) Execute(ctx context.Context, id string) error {
	if err := e.rs.ExecuteReaction(ctx, id, e.now()); err != nil {
		return fmt.Errorf("execute reaction %s: %w", id, err)
	}
	wake(e.wakeDeliver)
	return nil
}
