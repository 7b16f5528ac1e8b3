package storagetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// testReactionsRace runs claims whose leases end at once, outcome records
// (completions and retries), executes, cancels and deletions of an
// aggregate's reactions at the same time on the same reactions, and
// checks that no call fails otherwise than with ErrConflict or ErrNotFound
// (a deadlock between two of them would) and that afterwards every
// reaction left is delivered to the end: claimed until none is left, no
// reaction stays pending or ongoing and none is due any more.
func testReactionsRace(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	ctx := t.Context()
	const n = 40
	var rs []storage.Reaction
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("r%02d", i)
		rs = append(rs, newReaction(ids[i], "r", fmt.Sprint("a", i%8), rt0.Add(time.Duration(i)*time.Millisecond)))
	}
	mustSchedule(t, s, "r", rs...)
	now := rt0.Add(time.Hour)
	errs := make(chan error, 64)
	report := func(op string, err error) {
		if err != nil && !errors.Is(err, storage.ErrConflict) && !errors.Is(err, storage.ErrNotFound) {
			select {
			case errs <- fmt.Errorf("%s: %w", op, err):
			default:
			}
		}
	}
	const rounds = 30
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			for k := range rounds {
				// The lease ends when it begins: another claim may take
				// the same reactions at once.
				got, err := s.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now, Claim: fmt.Sprintf("w%d-%d", w, k), Limit: 6})
				report("ClaimReactions", err)
				var outcomes []storage.ReactionOutcome
				for _, r := range got {
					o := storage.ReactionOutcome{ID: r.ID, Claim: r.Claim, State: storage.ReactionCompleted, At: now}
					switch rnd.IntN(3) {
					case 0:
						continue // left claimed
					case 1:
						o.State, o.DueAt, o.Error = storage.ReactionPending, now, "retry"
					}
					outcomes = append(outcomes, o)
				}
				if len(outcomes) > 0 {
					oerrs, err := s.FinishReactions(ctx, outcomes)
					report("FinishReactions", err)
					for _, err := range oerrs {
						report("FinishReactions outcome", err)
					}
				}
			}
		})
	}
	wg.Go(func() {
		rnd := rand.New(rand.NewPCG(7, 2))
		for range rounds {
			report("ExecuteReaction", s.ExecuteReaction(ctx, ids[rnd.IntN(n)], now))
			report("CancelReaction", s.CancelReaction(ctx, ids[rnd.IntN(n)], now))
		}
	})
	wg.Go(func() {
		for _, agg := range []string{"a3", "a5"} {
			time.Sleep(5 * time.Millisecond)
			report("DeleteAggregateReactions", s.DeleteAggregateReactions(ctx, "order", agg))
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Deliver what is left, to the end.
	later := now.Add(time.Hour)
	for k := 0; ; k++ {
		if k > n {
			t.Fatalf("claims still find reactions after %d rounds", k)
		}
		got, err := s.ClaimReactions(ctx, storage.ReactionClaim{Now: later, Until: later.Add(time.Hour), Claim: fmt.Sprint("end-", k), Limit: n})
		if err != nil {
			t.Fatalf("ClaimReactions: %v", err)
		}
		if len(got) == 0 {
			break
		}
		var outcomes []storage.ReactionOutcome
		for _, r := range got {
			outcomes = append(outcomes, storage.ReactionOutcome{ID: r.ID, Claim: r.Claim, State: storage.ReactionCompleted, At: later})
		}
		oerrs, err := s.FinishReactions(ctx, outcomes)
		if err != nil {
			t.Fatalf("FinishReactions: %v", err)
		}
		for i, err := range oerrs {
			if err != nil {
				t.Errorf("FinishReactions %s: %v", outcomes[i].ID, err)
			}
		}
	}
	if due, ok, err := s.NextReactionDue(ctx); err != nil || ok {
		t.Errorf("NextReactionDue after every reaction ended = %v, %v, %v; want none", due, ok, err)
	}
	active, err := s.ListReactions(ctx, storage.ReactionQuery{States: []storage.ReactionState{storage.ReactionPending, storage.ReactionOngoing}, Limit: n})
	if err != nil || active.Total != 0 {
		t.Errorf("active reactions after every reaction ended: %+v, %v; want none", active, err)
	}
	all, err := s.ListReactions(ctx, storage.ReactionQuery{Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(n - 2*n/8); all.Total != want {
		t.Errorf("%d reactions left, want %d (those of the two aggregates deleted gone)", all.Total, want)
	}
	for _, r := range all.Reactions {
		if r.AggregateID == "a3" || r.AggregateID == "a5" {
			t.Errorf("reaction %s of deleted aggregate %s is still listed", r.ID, r.AggregateID)
		}
	}
}
