package extfunc_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/extfunc"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// backends are the storages the tests run on.
var backends = map[string]func(t *testing.T) storage.Storage{
	"memory": func(*testing.T) storage.Storage { return memory.New() },
	"sqlite": func(t *testing.T) storage.Storage {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "es.db"), nil)
		require.NoError(t, err)
		return s
	},
	"postgres": openPostgres,
}

var schemas atomic.Int64

// openPostgres opens a fresh schema of EVENTSTORE_POSTGRES_URL (default a
// local test database), dropped at the end; it skips when PostgreSQL is
// unreachable, unless EVENTSTORE_POSTGRES_REQUIRED=1.
func openPostgres(t *testing.T) storage.Storage {
	url := os.Getenv("EVENTSTORE_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	schema := fmt.Sprintf("es_extfunc_test_%d_%d", os.Getpid(), schemas.Add(1))
	s, err := postgres.OpenURL(context.Background(), url, &postgres.Options{Schema: schema})
	if err != nil {
		if os.Getenv("EVENTSTORE_POSTGRES_REQUIRED") == "1" {
			t.Fatal(err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	t.Cleanup(func() {
		_ = s.Close()
		if conn, err := pgx.Connect(context.Background(), url); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	return s
}

// receiver is an external function: it counts the "n" of the state, checks
// the signature and answers what answer returns.
type receiver struct {
	t      *testing.T
	secret string
	mu     sync.Mutex
	bodies []map[string]any
	raw    [][]byte
	answer func(body map[string]any, attempt int) (int, string)
	calls  map[string]int // attempts by event id
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	require.NoError(rc.t, err)
	if !hmac.Equal([]byte(r.Header.Get(reactions.HeaderSignature)), []byte(reactions.Sign(rc.secret, b))) {
		rc.t.Errorf("bad signature %q over %s", r.Header.Get(reactions.HeaderSignature), b)
	}
	assert.Equal(rc.t, "application/json", r.Header.Get("Content-Type"))
	var body map[string]any
	require.NoError(rc.t, json.Unmarshal(b, &body))
	rc.mu.Lock()
	rc.bodies = append(rc.bodies, body)
	rc.raw = append(rc.raw, b)
	id := body["event"].(map[string]any)["eventId"].(string)
	rc.calls[id]++
	n := rc.calls[id]
	rc.mu.Unlock()
	var fresh map[string]any // the answer may change it
	require.NoError(rc.t, json.Unmarshal(b, &fresh))
	code, out := rc.answer(fresh, n)
	w.WriteHeader(code)
	_, _ = io.WriteString(w, out)
}

// counter answers the current state with n incremented and last set to
// the event's data, and the event type as the reference.
func counter(body map[string]any, _ int) (int, string) {
	st := body["currentState"].(map[string]any)
	n, _ := st["n"].(float64)
	st["n"], st["last"] = n+1, body["event"].(map[string]any)["data"]
	b, _ := json.Marshal(map[string]any{"updatedState": st, "reference": body["event"].(map[string]any)["eventType"]})
	return 200, string(b)
}

type harness struct {
	st  *eventstore.Store
	p   *eventstore.Projector
	rc  *receiver
	url string
}

func newHarness(t *testing.T, backend string, secret string, answer func(map[string]any, int) (int, string), opts *extfunc.Options) *harness {
	t.Helper()
	rc := &receiver{t: t, secret: secret, answer: answer, calls: map[string]int{}}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	st, err := eventstore.New(backends[backend](t), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	if opts == nil {
		opts = &extfunc.Options{}
	}
	if opts.Outbound == nil {
		opts.Outbound = &reactions.Outbound{AllowHosts: []string{"127.0.0.1"}}
	}
	if opts.Backoff == 0 {
		opts.Backoff = time.Millisecond
	}
	p := eventstore.NewProjector(st, &eventstore.ProjectorOptions{Functions: extfunc.New(opts)})
	return &harness{st: st, p: p, rc: rc, url: srv.URL + "/fold"}
}

func (h *harness) def(name, secret string) eventstore.Definition {
	return eventstore.Definition{Name: name, Feed: "order", SigningSecret: secret, Handlers: []eventstore.Handler{
		{EventType: "Placed", FunctionURI: h.url},
		{EventType: "Shipped", FunctionURI: h.url},
		{EventType: "Noted", Functions: []eventstore.Function{{Name: eventstore.FuncSet, TargetSelector: "$.projection.note", EventSelector: "$.event.note"}}},
	}}
}

func (h *harness) save(t *testing.T, id string, evs ...eventstore.NewEvent) {
	t.Helper()
	for i := range evs {
		evs[i].ID = eventstore.NewEventID()
	}
	_, err := h.st.Save(context.Background(), "order", id, evs, nil)
	require.NoError(t, err)
}

func forEach(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, b := range []string{"memory", "sqlite", "postgres"} {
		t.Run(b, func(t *testing.T) { fn(t, b) })
	}
}

// TestFoldSignedState: each event is POSTed signed over the exact bytes
// (with the signingSecret, else the projection's name), with the metadata
// and current state; the answer's state and reference are stored, and
// built-in handlers of the same definition apply beside it.
func TestFoldSignedState(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		ctx := context.Background()
		for _, secret := range []string{"s3cret", ""} {
			key := secret
			if key == "" {
				key = "orders"
			}
			h := newHarness(t, backend, key, counter, nil)
			_, err := h.p.Put(ctx, h.def("orders", secret))
			require.NoError(t, err)
			h.save(t, "o1", eventstore.NewEvent{Type: "Placed", Data: json.RawMessage(`{"total":12.50}`)},
				eventstore.NewEvent{Type: "Noted", Data: json.RawMessage(`{"note":"fragile"}`)})
			h.save(t, "o1", eventstore.NewEvent{Type: "Shipped"})
			got, err := h.p.Single(ctx, "orders", "o1")
			require.NoError(t, err)
			assert.JSONEq(t, `{"n":2,"last":{},"note":"fragile"}`, string(got.Data), "numbers are kept as the function wrote them")
			assert.Equal(t, "Shipped", got.Reference.Text)
			require.Len(t, h.rc.bodies, 2)
			first := h.rc.bodies[0]
			md := first["metadata"].(map[string]any)
			assert.Equal(t, "o1", md["aggregateId"])
			assert.Equal(t, "order", md["aggregateType"])
			assert.Equal(t, "orders", md["projectionName"])
			assert.Equal(t, "o1", md["projectionId"])
			for _, k := range []string{"timestamp", "createdAt", "updatedAt", "sequenceNumber", "aggregateVersion"} {
				assert.Contains(t, md, k)
			}
			assert.Equal(t, map[string]any{}, first["currentState"])
			assert.Equal(t, map[string]any{"total": 12.50}, first["event"].(map[string]any)["data"])
			assert.Contains(t, string(h.rc.raw[0]), `"total":12.50`, "the event data is sent byte for byte")
			assert.Equal(t, map[string]any{"n": 1.0, "last": map[string]any{"total": 12.5}, "note": "fragile"},
				h.rc.bodies[1]["currentState"], "the second call sees the first's state and the built-in handler's")
		}
	})
}

// TestDeleteAnswer: {"delete":true} deletes the instance; a later event
// starts it afresh.
func TestDeleteAnswer(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		ctx := context.Background()
		h := newHarness(t, backend, "orders", func(body map[string]any, n int) (int, string) {
			if body["event"].(map[string]any)["eventType"] == "Shipped" {
				return 200, `{"delete":true}`
			}
			return counter(body, n)
		}, nil)
		require.NoError(t, h.p.Create(ctx, h.def("orders", "")))
		h.save(t, "o1", eventstore.NewEvent{Type: "Placed"})
		_, err := h.p.Single(ctx, "orders", "o1")
		require.NoError(t, err)
		h.save(t, "o1", eventstore.NewEvent{Type: "Shipped"})
		_, err = h.p.Single(ctx, "orders", "o1")
		assert.ErrorIs(t, err, eventstore.ErrNotFound)
		h.save(t, "o1", eventstore.NewEvent{Type: "Shipped"}, eventstore.NewEvent{Type: "Placed"})
		got, err := h.p.Single(ctx, "orders", "o1")
		require.NoError(t, err)
		assert.JSONEq(t, `{"n":1,"last":{}}`, string(got.Data))
	})
}

// TestRetryThenRecordedError: a failing call is retried; after the last
// attempt the event is a recorded error, shown by Status and counted by
// the Metrics, and the next events still apply. Bad answers change
// nothing (whole or not at all).
func TestRetryThenRecordedError(t *testing.T) {
	forEach(t, func(t *testing.T, backend string) {
		ctx := context.Background()
		h := newHarness(t, backend, "orders", func(body map[string]any, n int) (int, string) {
			data := body["event"].(map[string]any)["data"].(map[string]any)
			switch data["case"] {
			case "flaky":
				if n < 3 {
					return 503, ""
				}
			case "down":
				return 500, "oops"
			case "array":
				return 200, `{"updatedState":[1]}`
			case "notjson":
				return 200, `<html>`
			case "badref":
				return 200, `{"updatedState":{},"reference":{"a":1}}`
			case "redirect":
				return 302, ""
			}
			return counter(body, n)
		}, &extfunc.Options{Attempts: 3})
		require.NoError(t, h.p.Create(ctx, h.def("orders", "")))
		for _, c := range []string{"ok", "flaky", "down", "array", "notjson", "badref", "redirect", "ok"} {
			h.save(t, "o1", eventstore.NewEvent{Type: "Placed", Data: json.RawMessage(`{"case":"` + c + `"}`)})
		}
		got, err := h.p.Single(ctx, "orders", "o1")
		require.NoError(t, err)
		assert.JSONEq(t, `{"n":3,"last":{"case":"ok"}}`, string(got.Data), "ok, flaky (third attempt) and ok applied; the rest changed nothing")
		st, err := h.p.Status(ctx, "orders")
		require.NoError(t, err)
		var msgs []string
		for _, e := range st.Errors {
			msgs = append(msgs, e.Message)
			assert.Equal(t, "o1", e.InstanceID)
		}
		assert.Equal(t, []string{
			"external function, 3 attempts: the function answered 500",
			"external function, 3 attempts: the answer has neither an \"updatedState\" object nor \"delete\": true",
			"external function, 3 attempts: the answer is not a JSON object of the form {\"updatedState\":{...}} or {\"delete\":true}",
			"the reference must be a string, a number or null",
			"external function, 3 attempts: the function answered 302",
		}, msgs)
	})
}

// TestBounds: an answer over MaxResponseBytes, a state over the
// instance limit and an endpoint slower than Timeout are recorded errors.
func TestBounds(t *testing.T) {
	ctx := context.Background()
	big := `{"updatedState":{"x":"` + strings.Repeat("a", 5000) + `"}}`
	h := newHarness(t, "memory", "orders", func(body map[string]any, n int) (int, string) {
		switch body["event"].(map[string]any)["data"].(map[string]any)["case"] {
		case "big":
			return 200, big
		case "slow":
			time.Sleep(300 * time.Millisecond)
		}
		return counter(body, n)
	}, &extfunc.Options{Attempts: 1, MaxResponseBytes: 4096, Timeout: 100 * time.Millisecond})
	require.NoError(t, h.p.Create(ctx, h.def("orders", "")))
	for _, c := range []string{"big", "slow", "ok"} {
		h.save(t, "o1", eventstore.NewEvent{Type: "Placed", Data: json.RawMessage(`{"case":"` + c + `"}`)})
	}
	got, err := h.p.Single(ctx, "orders", "o1")
	require.NoError(t, err)
	assert.JSONEq(t, `{"n":1,"last":{"case":"ok"}}`, string(got.Data))
	st, err := h.p.Status(ctx, "orders")
	require.NoError(t, err)
	require.Len(t, st.Errors, 2)
	assert.Equal(t, "external function, 1 attempt: the answer is larger than 4096 bytes", st.Errors[0].Message)
	assert.Equal(t, "external function, 1 attempt: no answer within 100ms", st.Errors[1].Message)

	// The instance limit applies to the answer's state.
	h2 := newHarness(t, "memory", "orders", func(map[string]any, int) (int, string) { return 200, big }, nil)
	h2.p = eventstore.NewProjector(h2.st, &eventstore.ProjectorOptions{MaxInstanceBytes: 1000,
		Functions: extfunc.New(&extfunc.Options{Outbound: &reactions.Outbound{AllowAll: true}})})
	require.NoError(t, h2.p.Create(ctx, h2.def("orders", "")))
	h2.save(t, "o1", eventstore.NewEvent{Type: "Placed"})
	_, err = h2.p.Single(ctx, "orders", "o1")
	assert.ErrorIs(t, err, eventstore.ErrNotFound)
	st, err = h2.p.Status(ctx, "orders")
	require.NoError(t, err)
	require.Len(t, st.Errors, 1)
	assert.Contains(t, st.Errors[0].Message, "over the limit of 1000")
}

// TestRefusedTarget: a definition whose functionUri the outbound policy
// refuses is a *ValidationError naming the field; a Projector without
// Functions refuses any functionUri.
func TestRefusedTarget(t *testing.T) {
	ctx := context.Background()
	st, err := eventstore.New(memory.New(), nil)
	require.NoError(t, err)
	defer st.Close()
	d := eventstore.Definition{Name: "orders", Feed: "order", Handlers: []eventstore.Handler{
		{EventType: "Placed", FunctionURI: "http://127.0.0.1:9/fold"},
		{EventType: "Paid", FunctionURI: "http://169.254.169.254/latest"}}}
	for _, tc := range []struct {
		p    *eventstore.Projector
		want []string
	}{
		{eventstore.NewProjector(st, &eventstore.ProjectorOptions{Functions: extfunc.New(nil)}), []string{
			"127.0.0.1 is a loopback address, which the server's outbound policy refuses",
			"169.254.169.254 is a link-local address (such as a cloud metadata service), which the server's outbound policy refuses"}},
		{eventstore.NewProjector(st, nil), []string{
			"external functions are not enabled in this store", "external functions are not enabled in this store"}},
	} {
		for _, put := range []bool{false, true} {
			if put {
				_, err = tc.p.Put(ctx, d)
			} else {
				err = tc.p.Create(ctx, d)
			}
			var ve *eventstore.ValidationError
			require.True(t, errors.As(err, &ve), "%v", err)
			require.Len(t, ve.Fields, 2)
			assert.Equal(t, "handlers[0].functionUri", ve.Fields[0].Field)
			assert.Equal(t, "handlers[1].functionUri", ve.Fields[1].Field)
			assert.Equal(t, tc.want, []string{ve.Fields[0].Message, ve.Fields[1].Message})
		}
	}
	// Allowed by the policy: accepted.
	p := eventstore.NewProjector(st, &eventstore.ProjectorOptions{Functions: extfunc.New(&extfunc.Options{
		Outbound: &reactions.Outbound{Allow: mustPrefixes(t, "127.0.0.1/32,169.254.0.0/16")}})})
	require.NoError(t, p.Create(ctx, d))
}

func mustPrefixes(t *testing.T, list string) []netip.Prefix {
	t.Helper()
	p, _, err := reactions.ParseAllow(list)
	require.NoError(t, err)
	return p
}
