package storagetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

func closeCases() []testCase {
	return []testCase{
		{"ClosedStorageFails", "after Close every method fails with ErrClosed, and Close is idempotent", testClosed},
	}
}

func testClosed(t *testing.T, h *harness) {
	ctx := t.Context()
	mustSave(t, h, "order", "o", evs("Placed", 2), nil)
	mustCreate(t, h, newDef("p"))
	checkInvariants(t, h.s)
	h.closed = true
	if err := h.s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := h.s.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
		t.Errorf("Close is idempotent: a second Close must not fail with another error, got %v", err)
	}
	req := storage.AppendRequest{AggregateType: "order", AggregateID: "o", Events: []storage.Event{{
		ID: newID(), Type: "Placed", AggregateType: "order", AggregateID: "o",
		RecordedAt: time.Now().UTC().Truncate(time.Microsecond),
	}}}
	_, appendErr := h.s.Append(ctx, req)
	_, saveErr := h.store.Save(ctx, "order", "o", evs("Placed", 1), nil)
	_, loadErr := h.s.Load(ctx, storage.LoadQuery{AggregateType: "order", AggregateID: "o"})
	_, feedErr := h.s.ReadFeed(ctx, storage.FeedQuery{Limit: 10})
	_, defErr := h.s.Definition(ctx, "p")
	_, defsErr := h.s.Definitions(ctx)
	_, stateErr := h.s.LoadProjection(ctx, "p", "o")
	_, allErr := h.s.AppendAll(ctx, []storage.AppendRequest{req})
	_, headErr := h.s.FeedHead(ctx, "")
	_, feedsErr := h.s.Feeds(ctx)
	_, statesErr := h.s.LoadProjections(ctx, "p", []string{"o"})
	_, listErr := h.s.ListProjections(ctx, storage.ProjectionQuery{Name: "p", Limit: 10})
	for name, err := range map[string]error{
		"Append":              appendErr,
		"Store.Save":          saveErr,
		"Load":                loadErr,
		"ReadFeed":            feedErr,
		"CreateDefinition":    h.s.CreateDefinition(ctx, newDef("q")),
		"Definition":          defErr,
		"Definitions":         defsErr,
		"LoadProjection":      stateErr,
		"AppendAll":           allErr,
		"FeedHead":            headErr,
		"Feeds":               feedsErr,
		"DeleteAggregate":     h.s.DeleteAggregate(ctx, "order", "o"),
		"DeleteAggregateType": h.s.DeleteAggregateType(ctx, "order"),
		"DeleteDefinition":    h.s.DeleteDefinition(ctx, "p"),
		"ResetProjection":     h.s.ResetProjection(ctx, "p"),
		"RenameProjection":    h.s.RenameProjection(ctx, "p", "q"),
		"UpdateSpec":          h.s.UpdateSpec(ctx, "p", newDef("p").Spec, newDef("q").Spec),
		"LoadProjections":     statesErr,
		"ListProjections":     listErr,
		"CommitProjection": h.s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", To: 1,
			States: []storage.ProjectionState{{Name: "p", InstanceID: "o", Data: json.RawMessage(`{}`)}}}),
	} {
		if !errors.Is(err, storage.ErrClosed) {
			t.Errorf("%s after Close must fail with ErrClosed, got %v", name, err)
		}
	}
}
