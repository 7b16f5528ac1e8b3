package storagetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// This file holds the cases of claims and outcome records, what deliveries
// write.

func testClaim(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	ctx := t.Context()
	mustSchedule(t, s, "r", newReaction("c", "r", "a", rt0.Add(3*time.Second)), newReaction("a", "r", "a", rt0.Add(time.Second)),
		newReaction("b", "r", "a", rt0.Add(2*time.Second)), newReaction("z", "r", "a", rt0.Add(time.Hour)))
	now := rt0.Add(time.Minute)
	if due, ok, err := s.NextReactionDue(ctx); err != nil || !ok || !due.Equal(rt0.Add(time.Second)) {
		t.Errorf("NextReactionDue: %v %v %v, want %v", due, ok, err, rt0.Add(time.Second))
	}
	got, err := s.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(time.Minute), Claim: "k1", Limit: 2})
	if err != nil || len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" {
		t.Fatalf("claiming 2: got %v, %v; want a, b", reactionIDs(got), err)
	}
	if r := got[0]; r.State != storage.ReactionOngoing || r.Claim != "k1" || r.Attempts != 1 || !r.DueAt.Equal(now.Add(time.Minute)) || len(r.Payload) == 0 {
		t.Errorf("a claimed reaction: %+v", r)
	}
	got, _ = s.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(time.Minute), Claim: "k2", Limit: 10})
	if len(got) != 1 || got[0].ID != "c" {
		t.Fatalf("the next claim: got %v, want c (z is not due, a and b are leased)", reactionIDs(got))
	}
	later := now.Add(2 * time.Minute)
	got, _ = s.ClaimReactions(ctx, storage.ReactionClaim{Now: later, Until: later.Add(time.Minute), Claim: "k3", Limit: 1})
	if len(got) != 1 || got[0].ID != "a" || got[0].Attempts != 2 {
		t.Fatalf("after the lease ended: got %+v, want a again with 2 attempts", got)
	}
	if err := finishOne(ctx, s, storage.ReactionOutcome{ID: "a", Claim: "k1", State: storage.ReactionCompleted, At: later}); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("finishing under a lost claim: got %v, want ErrConflict", err)
	}
	if err := finishOne(ctx, s, storage.ReactionOutcome{ID: "a", Claim: "k3", State: storage.ReactionCompleted, At: later}); err != nil {
		t.Fatal(err)
	}
	if r := mustReaction(t, s, "a"); r.State != storage.ReactionCompleted || !r.FinishedAt.Equal(later) {
		t.Errorf("a completed reaction: %+v", r)
	}
	retry := later.Add(time.Hour)
	if err := finishOne(ctx, s, storage.ReactionOutcome{ID: "b", Claim: "k1", State: storage.ReactionPending, DueAt: retry, Error: "answered 500"}); err != nil {
		t.Fatal(err)
	}
	if r := mustReaction(t, s, "b"); r.State != storage.ReactionPending || !r.DueAt.Equal(retry) || r.LastError != "answered 500" || r.Attempts != 1 {
		t.Errorf("a reaction to retry: %+v", r)
	}
	if err := finishOne(ctx, s, storage.ReactionOutcome{ID: "nope", Claim: "k1"}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("finishing an unknown reaction: %v, want ErrNotFound", err)
	}
	// Several outcomes at once: each applies or fails alone.
	errs, err := s.FinishReactions(ctx, []storage.ReactionOutcome{
		{ID: "c", Claim: "k2", State: storage.ReactionFailed, At: later, Error: "gave up"},
		{ID: "a", Claim: "k3", State: storage.ReactionCompleted, At: later},
		{ID: "nope", Claim: "k1"},
	})
	if err != nil || len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], storage.ErrConflict) || !errors.Is(errs[2], storage.ErrNotFound) {
		t.Errorf("FinishReactions of an applicable, a finished and an unknown reaction: %v, %v; want nil, ErrConflict, ErrNotFound", errs, err)
	}
	if r := mustReaction(t, s, "c"); r.State != storage.ReactionFailed || r.LastError != "gave up" || !r.FinishedAt.Equal(later) {
		t.Errorf("a failed reaction: %+v", r)
	}
	// Two outcomes for one reaction in one batch (an attempt under a lost
	// claim and the current one): only the current claim's applies.
	mustSchedule(t, s, "r", newReaction("d", "r", "a", rt0))
	if got, _ = s.ClaimReactions(ctx, storage.ReactionClaim{Now: later, Until: later.Add(time.Minute), Claim: "k4", Limit: 1}); len(got) != 1 || got[0].ID != "d" {
		t.Fatalf("claiming d: got %v", reactionIDs(got))
	}
	errs, err = s.FinishReactions(ctx, []storage.ReactionOutcome{
		{ID: "d", Claim: "k0", State: storage.ReactionCompleted, At: later},
		{ID: "d", Claim: "k4", State: storage.ReactionPending, DueAt: retry, Error: "answered 503"},
	})
	if err != nil || len(errs) != 2 || !errors.Is(errs[0], storage.ErrConflict) || errs[1] != nil {
		t.Errorf("FinishReactions of a lost and the current claim of one reaction: %v, %v; want ErrConflict, nil", errs, err)
	}
	if r := mustReaction(t, s, "d"); r.State != storage.ReactionPending || !r.DueAt.Equal(retry) || r.LastError != "answered 503" {
		t.Errorf("d after the current claim's outcome: %+v", r)
	}
}

func testClaimFinishMany(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	ctx := t.Context()
	const n = 600
	var rs []storage.Reaction
	for i := range n {
		// Inserted out of due order, ids not in due order either.
		j := (i * 7) % n
		r := newReaction(fmt.Sprintf("m-%03d", (j*13)%n), "r", fmt.Sprint("a-", j), rt0.Add(time.Duration(j)*time.Millisecond))
		r.Payload = []byte(fmt.Sprintf(`{"n":%d,"text":"\u00e9 \"quoted\""}`, j))
		rs = append(rs, r)
	}
	mustSchedule(t, s, "r", rs...)
	now := rt0.Add(time.Hour)
	got, err := s.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(time.Minute), Claim: "big", Limit: n + 10})
	if err != nil || len(got) != n {
		t.Fatalf("claiming %d: got %d, %v", n, len(got), err)
	}
	for i, r := range got {
		want := rt0.Add(time.Duration(i) * time.Millisecond)
		if r.TriggerAt.Compare(want) != 0 || r.State != storage.ReactionOngoing || r.Claim != "big" || r.Attempts != 1 ||
			!r.DueAt.Equal(now.Add(time.Minute)) || r.AggregateID != fmt.Sprint("a-", i) ||
			string(r.Payload) != fmt.Sprintf(`{"n":%d,"text":"\u00e9 \"quoted\""}`, i) {
			t.Fatalf("claimed reaction %d: %+v (payload %s), want the one triggered at %v, ongoing under the claim", i, r, r.Payload, want)
		}
	}
	odd := "quote \" \\ back, tab\t newline\n, ünïcode ✓, percent %s, nul-free"
	outcomes := make([]storage.ReactionOutcome, 0, n)
	for i, r := range got {
		o := storage.ReactionOutcome{ID: r.ID, Claim: "big", At: now.Add(time.Duration(i) * time.Microsecond)}
		switch i % 3 {
		case 0:
			o.State = storage.ReactionCompleted
		case 1:
			o.State, o.Error = storage.ReactionFailed, fmt.Sprint(odd, " #", i)
		case 2:
			o.State, o.DueAt, o.Error = storage.ReactionPending, now.Add(time.Duration(i)*time.Second), fmt.Sprint("retry #", i)
		}
		outcomes = append(outcomes, o)
	}
	errs, err := s.FinishReactions(ctx, outcomes)
	if err != nil || len(errs) != n {
		t.Fatalf("FinishReactions of %d: %d errors, %v", n, len(errs), err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("outcome %d: %v", i, e)
		}
	}
	for i, r := range got {
		g := mustReaction(t, s, r.ID)
		o := outcomes[i]
		ok := g.State == o.State && g.LastError == o.Error && g.Claim == ""
		switch o.State {
		case storage.ReactionPending:
			ok = ok && g.DueAt.Equal(o.DueAt) && g.FinishedAt.IsZero()
		default:
			ok = ok && g.FinishedAt.Equal(o.At)
		}
		if !ok {
			t.Fatalf("reaction %d after its outcome %+v: %+v", i, o, g)
		}
	}
	// The same outcomes again: the claim is spent, nothing applies.
	errs, err = s.FinishReactions(ctx, outcomes)
	if err != nil || len(errs) != n {
		t.Fatalf("FinishReactions again: %d errors, %v", len(errs), err)
	}
	for i, e := range errs {
		if !errors.Is(e, storage.ErrConflict) {
			t.Fatalf("outcome %d again: %v, want ErrConflict", i, e)
		}
	}
}

func reactionIDs(rs []storage.Reaction) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func testClaimConcurrent(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	var rs []storage.Reaction
	for i := range 60 {
		rs = append(rs, newReaction(fmt.Sprintf("r%02d", i), "r", "a", rt0.Add(time.Duration(i)*time.Millisecond)))
	}
	mustSchedule(t, s, "r", rs...)
	now := rt0.Add(time.Hour)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for {
				got, err := s.ClaimReactions(t.Context(), storage.ReactionClaim{Now: now, Until: now.Add(time.Hour), Claim: fmt.Sprint("w", w), Limit: 3})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					seen[r.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("ClaimReactions: %v", err)
	}
	if len(seen) != 60 {
		t.Errorf("claimed %d distinct reactions, want 60", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("reaction %s was claimed %d times", id, n)
		}
	}
}

// finishOne records one outcome with FinishReactions.
func finishOne(ctx context.Context, s storage.ReactionStorage, o storage.ReactionOutcome) error {
	errs, err := s.FinishReactions(ctx, []storage.ReactionOutcome{o})
	if err != nil {
		return err
	}
	if len(errs) != 1 {
		return fmt.Errorf("FinishReactions returned %d errors for 1 outcome", len(errs))
	}
	return errs[0]
}
