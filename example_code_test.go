package eventstore_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// revenue is the state of a projection in Go on the root package's hook;
// package typed builds such states from typed handlers.
type revenue struct {
	Orders int     `json:"orders"`
	Total  float64 `json:"total"`
}

func (r *revenue) Apply(e *eventstore.Event) error {
	var placed struct{ Total float64 }
	if err := json.Unmarshal(e.Data, &placed); err != nil {
		return err
	}
	r.Orders++
	r.Total += placed.Total
	return nil
}

func (r *revenue) MarshalJSON() ([]byte, error) {
	type plain revenue
	return json.Marshal((*plain)(r))
}

func ExampleProjector_Register() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)

	err := p.Register(ctx, eventstore.CodeProjection{
		Name: "revenue", Feed: "order", Version: 1, Aggregated: true,
		EventTypes: []string{"OrderPlaced"},
		Decode: func(data []byte) (eventstore.CodeState, error) {
			r := &revenue{}
			if data != nil {
				return r, json.Unmarshal(data, r)
			}
			return r, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i, total := range []string{"12.5", "7.5"} {
		_, err := st.Save(ctx, "order", fmt.Sprint("o-", i), []eventstore.NewEvent{
			{ID: eventstore.NewEventID(), Type: "OrderPlaced", Data: []byte(`{"total": ` + total + `}`)},
		}, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	pj, _ := p.Aggregated(ctx, "revenue") // reads your writes, as for a Definition
	fmt.Println(string(pj.Data))
	d, _ := p.Definition(ctx, "revenue") // the stored record: kind, version, event types
	fmt.Println(d.Code.Version, d.Handlers[0].EventType)
	// Output:
	// {"orders":2,"total":20}
	// 1 OrderPlaced
}
