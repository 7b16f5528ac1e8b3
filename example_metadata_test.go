package eventstore_test

import (
	"context"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// ExampleMetadata saves an event with metadata and loads it back.
func ExampleMetadata() {
	ctx := context.Background()
	store, _ := eventstore.New(memory.New(), nil)
	defer store.Close()
	_, err := store.Save(ctx, "order", "o-1", []eventstore.NewEvent{{
		ID: eventstore.NewEventID(), Type: "Placed", Data: []byte(`{"total":12.5}`),
		Metadata: eventstore.Metadata{CorrelationID: "req-17", CausationID: "cmd-3",
			Values: map[string]string{"tenant": "acme"}},
	}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	agg, _ := store.Load(ctx, "order", "o-1")
	m := agg.Events[0].Metadata
	fmt.Println(m.CorrelationID, m.CausationID, m.Values["tenant"])

	// A key that would shadow a $.metadata field is refused.
	_, err = store.Save(ctx, "order", "o-1", []eventstore.NewEvent{{
		ID: eventstore.NewEventID(), Type: "Placed",
		Metadata: eventstore.Metadata{Values: map[string]string{"eventType": "x"}},
	}}, nil)
	fmt.Println(err)
	// Output:
	// req-17 cmd-3 acme
	// eventstore: save: invalid input: events[0].metadata["eventType"]: "eventType" is reserved: $.metadata.eventType means the event's own field
}
