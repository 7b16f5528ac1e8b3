package extfunc_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/extfunc"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// A projection whose handler calls an external function, here a local
// receiver that checks the signature and counts orders.
func Example() {
	fn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !hmac.Equal([]byte(r.Header.Get(reactions.HeaderSignature)), []byte(reactions.Sign("whsec", body))) {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		var in struct {
			CurrentState struct{ Orders int } `json:"currentState"`
		}
		_ = json.Unmarshal(body, &in)
		fmt.Fprintf(w, `{"updatedState":{"orders":%d}}`, in.CurrentState.Orders+1)
	}))
	defer fn.Close()

	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	caller := extfunc.New(&extfunc.Options{
		// The receiver is on this host: allow loopback, refused by default.
		Outbound: &reactions.Outbound{AllowHosts: []string{"127.0.0.1"}},
	})
	p := eventstore.NewProjector(st, &eventstore.ProjectorOptions{Functions: caller})
	err := p.Create(ctx, eventstore.Definition{Name: "per-customer", Feed: "order", IDField: "customer",
		SigningSecret: "whsec", Handlers: []eventstore.Handler{{EventType: "Placed", FunctionURI: fn.URL}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, id := range []string{"o-1", "o-2"} {
		_, _ = st.Save(ctx, "order", id, []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Placed",
			Data: json.RawMessage(`{"customer":"ada"}`)}}, nil)
	}
	got, _ := p.Single(ctx, "per-customer", "ada")
	fmt.Println(string(got.Data))
	// Output: {"orders":2}
}
