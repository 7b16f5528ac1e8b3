package eventstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// TestAggregatesOptions: bad options and names are refused before the
// storage is asked, a closed Store fails with ErrClosed.
func TestAggregatesOptions(t *testing.T) {
	ctx := context.Background()
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: "5a0f6a2e-3c1d-4e8b-9f10-0000000000aa", Type: "T"}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		typ  string
		opts eventstore.AggregateListOptions
	}{
		{"order", eventstore.AggregateListOptions{Limit: -1}},
		{"order", eventstore.AggregateListOptions{Limit: limits.MaxListLimit + 1}},
		{"order", eventstore.AggregateListOptions{Skip: -1}},
		{"order", eventstore.AggregateListOptions{Skip: 1<<30 + 1}},
		{"", eventstore.AggregateListOptions{}},
		{"a/b", eventstore.AggregateListOptions{}},
	} {
		_, err := st.Aggregates(ctx, c.typ, &c.opts)
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, eventstore.ErrInvalid) {
			t.Errorf("Aggregates(%q, %+v) = %v, want a *ValidationError wrapping ErrInvalid", c.typ, c.opts, err)
		}
	}
	page, err := st.Aggregates(ctx, "order", &eventstore.AggregateListOptions{Skip: 1})
	if err != nil || len(page.Aggregates) != 0 || page.Total != 1 || page.HasMore {
		t.Errorf("a page past the end: %+v, %v; want empty, Total 1", page, err)
	}
	st.Close()
	if _, err := st.Aggregates(ctx, "order", nil); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("Aggregates after Close = %v, want ErrClosed", err)
	}
}
