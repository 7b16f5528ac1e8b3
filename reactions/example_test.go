package reactions_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// Remind a customer of an order that was placed and not paid: a Go
// function is called for each "placed" event, unless "paid" comes first.
// With an Offset such as "P3D" it would be called three days later, also
// across restarts on a durable storage.
func Example() {
	ctx := context.Background()
	s := memory.New()
	st, _ := eventstore.New(s, nil)
	defer st.Close()

	called := make(chan string)
	eng, err := reactions.New(st, s, &reactions.Options{Funcs: map[string]reactions.Func{
		"remind": func(_ context.Context, d reactions.Delivery) error {
			var body struct {
				Event struct {
					Data struct{ Customer string }
				}
			}
			_ = json.Unmarshal(d.Body, &body)
			called <- d.Reaction.AggregateID + " " + body.Event.Data.Customer
			return nil
		},
	}})
	if err != nil {
		panic(err)
	}
	err = eng.Create(ctx, reactions.Definition{
		Name: "payment-reminder", FeedName: "order", ReactOnEventType: "placed",
		CancelOnEventTypes: []string{"paid"},
		Action:             reactions.Action{Type: reactions.ActionFunc, Function: "remind"},
	})
	if err != nil {
		panic(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = eng.Run(runCtx); close(done) }()

	_, _ = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{
		{ID: eventstore.NewEventID(), Type: "placed", Data: json.RawMessage(`{"customer":"ada"}`)}}, nil)
	fmt.Println("reminded:", <-called)
	stop()
	<-done
	// Output: reminded: o-1 ada
}
