package httpapi_test

import (
	"crypto/hmac"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/extfunc"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/tidwall/gjson"
)

// newFuncEnv is newEnv with a Projector that calls external functions
// under out.
func newFuncEnv(t *testing.T, out *reactions.Outbound) *env {
	t.Helper()
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, &eventstore.ProjectorOptions{
		Functions: extfunc.New(&extfunc.Options{Outbound: out, Attempts: 2, Backoff: 1})})
	opts := &httpapi.Options{Keys: []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}}
	return &env{t: t, st: st, p: p, h: httpapi.New(st, p, opts)}
}

// TestExternalFunctionHTTP: a definition with functionUri and
// signingSecret is accepted, its secret never shown back; events are
// folded by the function; a failing one shows in GET /projections; a
// refused target is 422 naming the field.
func TestExternalFunctionHTTP(t *testing.T) {
	fn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !hmac.Equal([]byte(r.Header.Get("Serialized-Request-Signature")), []byte(reactions.Sign("whsec", b))) {
			http.Error(w, "bad signature", http.StatusForbidden)
			return
		}
		if gjson.GetBytes(b, "event.data.fail").Bool() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		n := gjson.GetBytes(b, "currentState.n").Int() + 1
		_, _ = io.WriteString(w, `{"updatedState":{"n":`+strconv.FormatInt(n, 10)+`},"reference":"r`+strconv.FormatInt(n, 10)+`"}`)
	}))
	defer fn.Close()
	e := newFuncEnv(t, &reactions.Outbound{Allow: mustAllow(t, "127.0.0.1/32")})
	def := `{"projectionName":"hook","feedName":"order","signingSecret":"whsec",
		"handlers":[{"eventType":"Placed","functionUri":"` + fn.URL + `/fold"}]}`
	got := readBody(t, e.must(200, "PUT", "/projections/definitions/hook", def))
	if strings.Contains(got, "whsec") || !strings.Contains(got, `"functionUri"`) {
		t.Errorf("PUT answered %s: want the functionUri and no secret", got)
	}
	got = readBody(t, e.must(200, "GET", "/projections/definitions/hook", ""))
	if strings.Contains(got, "whsec") || strings.Contains(got, "signingSecret") || strings.Contains(got, `"functions"`) {
		t.Errorf("GET answered %s: want no secret and no functions", got)
	}
	e.must(200, "POST", "/aggregates/order/events", `{"aggregateId":"6f1c4fb4-1111-4e8f-9a43-2b7a3c1d0001","events":[`+
		ev("7d3a0a4e-0000-4b1d-9a2b-000000000001", "Placed", `{}`)+`,`+
		ev("7d3a0a4e-0000-4b1d-9a2b-000000000002", "Placed", `{"fail":true}`)+`,`+
		ev("7d3a0a4e-0000-4b1d-9a2b-000000000003", "Placed", `{}`)+`]}`)
	got = readBody(t, e.must(200, "GET", "/projections/single/hook/6f1c4fb4-1111-4e8f-9a43-2b7a3c1d0001", ""))
	if gjson.Get(got, "data.n").Int() != 2 {
		t.Errorf("single: %s, want n 2 (the failing event changed nothing)", got)
	}
	got = readBody(t, e.must(200, "GET", "/projections", ""))
	msg := gjson.Get(got, `projections.#(projectionName=="hook").errors.0.message`).String()
	if msg != "external function, 2 attempts: the function answered 500" {
		t.Errorf("overview: %s, want the failed event's error", got)
	}

	// Loopback without the policy allowing it: 422 naming the field.
	e2 := newFuncEnv(t, nil)
	b := mustErr(t, e2.do("PUT", "/projections/definitions/hook", def), 422, "invalid")
	if !hasField(b.Errors, "handlers[0].functionUri") || !strings.Contains(b.Errors[0].Message, "loopback") {
		t.Errorf("refused target: %+v", b)
	}
	b = mustErr(t, e2.do("POST", "/projections/definitions", `{"projectionName":"x","feedName":"order",
		"handlers":[{"eventType":"Placed","functionUri":"ftp://fn.example.com/f"}]}`), 422, "invalid")
	if !hasField(b.Errors, "handlers[0].functionUri") {
		t.Errorf("ftp target: %+v", b)
	}
	b = mustErr(t, e2.do("POST", "/projections/definitions", `{"projectionName":"x","feedName":"order","signingSecret":7,
		"handlers":[{"eventType":"Placed","functionUri":"https://fn.example.com/f","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`), 422, "invalid")
	if !hasField(b.Errors, "signingSecret") {
		t.Errorf("mistyped secret: %+v", b)
	}
}

func mustAllow(t *testing.T, list string) []netip.Prefix {
	t.Helper()
	p, _, err := reactions.ParseAllow(list)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
