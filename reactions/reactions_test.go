package reactions_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// receiver records deliveries and checks their signature.
type receiver struct {
	mu     sync.Mutex
	ids    map[string]int
	bodies []json.RawMessage
	status int
	secret string
	bad    int
	got    chan string
}

func newReceiver(t *testing.T, secret string) (*receiver, *httptest.Server) {
	rc := &receiver{ids: map[string]int{}, status: 200, secret: secret, got: make(chan string, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if !hmac.Equal([]byte(r.Header.Get(reactions.HeaderSignature)), []byte(reactions.Sign(rc.secret, b))) ||
			r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Extra") != "yes" {
			rc.bad++
		}
		id := r.Header.Get(reactions.HeaderReactionID)
		rc.ids[id]++
		rc.bodies = append(rc.bodies, b)
		w.WriteHeader(rc.status)
		rc.got <- id
	}))
	t.Cleanup(srv.Close)
	return rc, srv
}

func setup(t *testing.T, s storage.Storage, opts *reactions.Options) (*eventstore.Store, *reactions.Engine) {
	st, err := eventstore.New(s, nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	if opts == nil {
		opts = &reactions.Options{}
	}
	opts.Outbound = &reactions.Outbound{AllowAll: true}
	e, err := reactions.New(st, s, opts)
	require.NoError(t, err)
	return st, e
}

func run(t *testing.T, e *reactions.Engine) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

func save(t *testing.T, st *eventstore.Store, id, typ, data string) {
	t.Helper()
	_, err := st.Save(t.Context(), "order", id, []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: typ, Data: json.RawMessage(data)}}, nil)
	require.NoError(t, err)
}

func def(target string) reactions.Definition {
	return reactions.Definition{Name: "remind", FeedName: "order", ReactOnEventType: "placed",
		CancelOnEventTypes: []string{"paid"},
		Action: reactions.Action{Type: reactions.ActionHTTPPost, TargetURI: target, SigningSecret: "s3cret",
			HTTPHeaders: map[string]string{"X-Extra": "yes"}}}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func statuses(t *testing.T, e *reactions.Engine) map[reactions.Status]int {
	p, err := e.Reactions(t.Context(), reactions.ListOptions{})
	require.NoError(t, err)
	m := map[reactions.Status]int{}
	for _, r := range p.Reactions {
		m[r.Status]++
	}
	return m
}

func TestDeliverSignedOnceAndCancel(t *testing.T) {
	rc, srv := newReceiver(t, "s3cret")
	st, e := setup(t, memory.New(), nil)
	save(t, st, "o-0", "placed", `{}`) // before the definition: never fires
	require.NoError(t, e.Create(t.Context(), def(srv.URL)))
	stop := run(t, e)
	defer stop()
	save(t, st, "o-1", "placed", `{"n":1}`)
	save(t, st, "o-2", "placed", `{"n":2}`)
	<-rc.got
	<-rc.got
	waitFor(t, "two completed", func() bool { return statuses(t, e)[reactions.StatusCompleted] == 2 })
	rc.mu.Lock()
	assert.Equal(t, 0, rc.bad, "every delivery is signed over its exact body and carries the headers")
	assert.Len(t, rc.ids, 2)
	for id, n := range rc.ids {
		assert.Equal(t, 1, n, "reaction %s delivered once", id)
	}
	var b struct {
		Metadata map[string]any `json:"metadata"`
		Event    map[string]any `json:"event"`
	}
	require.NoError(t, json.Unmarshal(rc.bodies[0], &b))
	assert.Equal(t, "order", b.Metadata["aggregateType"])
	assert.Equal(t, "placed", b.Event["eventType"])
	rc.mu.Unlock()

	// A reaction an hour away, cancelled by a payment.
	d := def(srv.URL)
	d.Name, d.Offset = "later", "PT1H"
	require.NoError(t, e.Create(t.Context(), d))
	save(t, st, "o-3", "placed", `{}`)
	waitFor(t, "scheduled", func() bool {
		p, _ := e.Reactions(t.Context(), reactions.ListOptions{Name: "later", Status: reactions.StatusScheduled})
		return p.Total == 1
	})
	save(t, st, "o-3", "paid", `{}`)
	waitFor(t, "cancelled", func() bool {
		p, _ := e.Reactions(t.Context(), reactions.ListOptions{Name: "later", Status: reactions.StatusCanceled})
		return p.Total == 1
	})
}

func TestRetryThenFail(t *testing.T) {
	rc, srv := newReceiver(t, "s3cret")
	rc.status = 500
	st, e := setup(t, memory.New(), &reactions.Options{Backoff: 20 * time.Millisecond, Attempts: 3})
	require.NoError(t, e.Create(t.Context(), def(srv.URL)))
	stop := run(t, e)
	defer stop()
	save(t, st, "o-1", "placed", `{}`)
	waitFor(t, "failed", func() bool { return statuses(t, e)[reactions.StatusFailed] == 1 })
	rc.mu.Lock()
	for _, n := range rc.ids {
		assert.Equal(t, 3, n, "three attempts, then FAILED")
	}
	rc.status = 200
	rc.mu.Unlock()
	p, err := e.Reactions(t.Context(), reactions.ListOptions{})
	require.NoError(t, err)
	assert.Contains(t, p.Reactions[0].LastError, "500")
	require.NoError(t, e.Execute(t.Context(), p.Reactions[0].ID))
	waitFor(t, "completed after execute", func() bool { return statuses(t, e)[reactions.StatusCompleted] == 1 })
}

func TestGoFuncTriggerFieldAndRestart(t *testing.T) {
	s := memory.New()
	var mu sync.Mutex
	var got []reactions.Delivery
	fns := map[string]reactions.Func{"remind": func(_ context.Context, d reactions.Delivery) error {
		mu.Lock()
		got = append(got, d)
		mu.Unlock()
		return nil
	}}
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st, e := setup(t, s, &reactions.Options{Funcs: fns, Now: clock, PollInterval: 10 * time.Millisecond})
	d := reactions.Definition{Name: "remind", FeedName: "order", ReactOnEventType: "placed",
		TriggerTimeField: "due", Offset: "-P1D", Action: reactions.Action{Type: reactions.ActionFunc, Function: "remind"}}
	require.NoError(t, e.Create(t.Context(), d))
	due := now.Add(48 * time.Hour).UTC().Format(time.RFC3339)
	save(t, st, "o-1", "placed", `{"due":"`+due+`"}`)
	save(t, st, "o-2", "placed", `{"nodue":1}`)
	require.NoError(t, e.ScheduleOnce(t.Context()))
	m := statuses(t, e)
	assert.Equal(t, 1, m[reactions.StatusScheduled])
	assert.Equal(t, 1, m[reactions.StatusFailed], "an event without the trigger field fails at once")

	// A second engine on the same storage (a restart) delivers it when due.
	_, e2 := setup(t, s, &reactions.Options{Funcs: fns, Now: clock, PollInterval: 10 * time.Millisecond})
	stop := run(t, e2)
	defer stop()
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	assert.Empty(t, got, "not due yet")
	now = now.Add(25 * time.Hour)
	mu.Unlock()
	waitFor(t, "delivered", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	waitFor(t, "completed", func() bool { return statuses(t, e2)[reactions.StatusCompleted] == 1 })
}

func TestValidation(t *testing.T) {
	_, e := setup(t, memory.New(), nil)
	d := def("ftp://x")
	d.Offset = "P1M"
	d.Action.HTTPHeaders = map[string]string{"Content-Type": "x"}
	err := e.Create(t.Context(), d)
	var ve *eventstore.ValidationError
	require.ErrorAs(t, err, &ve)
	fields := map[string]bool{}
	for _, f := range ve.Fields {
		fields[f.Field] = true
	}
	assert.True(t, fields["offset"] && fields["action.targetUri"] && fields["action.httpHeaders.Content-Type"], "%v", ve.Fields)
	d = def("http://example.com/x")
	d.Action.Type = "SLACK_MESSAGE"
	require.ErrorIs(t, e.Create(t.Context(), d), eventstore.ErrInvalid)
}

func TestOutboundRefusesLoopbackAndMetadata(t *testing.T) {
	st, err := eventstore.New(memory.New(), nil)
	require.NoError(t, err)
	defer st.Close()
	s := memory.New()
	e, err := reactions.New(st, s, nil)
	require.NoError(t, err)
	for _, target := range []string{"http://127.0.0.1:9/x", "http://169.254.169.254/latest", "http://[::1]/", "http://localhost/"} {
		err := e.Create(t.Context(), def(target))
		assert.ErrorIs(t, err, eventstore.ErrInvalid, target)
	}
}

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{"PT1H": time.Hour, "P3D": 72 * time.Hour, "-PT30M": -30 * time.Minute,
		"P1W": 7 * 24 * time.Hour, "PT0.5S": 500 * time.Millisecond, "P1DT2H": 26 * time.Hour, "PT-5M": -5 * time.Minute} {
		got, err := reactions.ParseDuration(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "P", "PT", "1H", "P1Y", "P1M", "PT1X", "P99999D"} {
		_, err := reactions.ParseDuration(in)
		assert.Error(t, err, in)
	}
}

func TestRefusedConnectionIsRetriedWithAPlainMessage(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	target := srv.URL
	srv.Close() // nothing listens there any more
	st, e := setup(t, memory.New(), &reactions.Options{Backoff: 10 * time.Millisecond, Attempts: 2})
	require.NoError(t, e.Create(t.Context(), def(target)))
	stop := run(t, e)
	defer stop()
	save(t, st, "o-1", "placed", `{}`)
	waitFor(t, "failed", func() bool { return statuses(t, e)[reactions.StatusFailed] == 1 })
	p, err := e.Reactions(t.Context(), reactions.ListOptions{Status: reactions.StatusFailed})
	require.NoError(t, err)
	assert.Equal(t, "the target refused the connection", p.Reactions[0].LastError)
	assert.Equal(t, 2, p.Reactions[0].Attempts)
}

// TestDeliveryCarriesEventMetadata: the event's metadata (correlation and
// causation ids and the caller's keys) is in the delivery as
// event.metadata, in the HTTP API's shape; an event without any has none.
func TestDeliveryCarriesEventMetadata(t *testing.T) {
	var mu sync.Mutex
	got := map[string]json.RawMessage{} // aggregate id: body
	fns := map[string]reactions.Func{"remind": func(_ context.Context, d reactions.Delivery) error {
		mu.Lock()
		defer mu.Unlock()
		got[d.Reaction.AggregateID] = d.Body
		return nil
	}}
	st, e := setup(t, memory.New(), &reactions.Options{Funcs: fns, PollInterval: 10 * time.Millisecond})
	require.NoError(t, e.Create(t.Context(), reactions.Definition{Name: "remind", FeedName: "order", ReactOnEventType: "placed",
		Action: reactions.Action{Type: reactions.ActionFunc, Function: "remind"}}))
	stop := run(t, e)
	defer stop()
	md := eventstore.Metadata{CorrelationID: "req-17", CausationID: "cmd-3", Values: map[string]string{"tenant": "acme", "a.b": "<c>"}}
	_, err := st.Save(t.Context(), "order", "o-1", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "placed", Data: json.RawMessage(`{"n":1}`), Metadata: md}}, nil)
	require.NoError(t, err)
	save(t, st, "o-2", "placed", `{"n":2}`)
	waitFor(t, "two deliveries", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 2 })
	mu.Lock()
	defer mu.Unlock()
	var b struct {
		Metadata map[string]any `json:"metadata"`
		Event    struct {
			EventType string            `json:"eventType"`
			Metadata  map[string]string `json:"metadata"`
		} `json:"event"`
	}
	require.NoError(t, json.Unmarshal(got["o-1"], &b), "%s", got["o-1"])
	assert.Equal(t, "placed", b.Event.EventType)
	assert.Equal(t, map[string]string{"correlationId": "req-17", "causationId": "cmd-3", "tenant": "acme", "a.b": "<c>"}, b.Event.Metadata)
	assert.Equal(t, "o-1", b.Metadata["aggregateId"], "the delivery's own metadata is unchanged")
	assert.NotContains(t, b.Metadata, "correlationId", "the event's metadata is not mixed into the delivery's")
	var plain map[string]map[string]any
	require.NoError(t, json.Unmarshal(got["o-2"], &plain))
	assert.NotContains(t, plain["event"], "metadata", "an event without metadata has none in its delivery")
}
