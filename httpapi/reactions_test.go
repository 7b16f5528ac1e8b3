package httpapi_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hook is a receiver of deliveries that checks their signature.
type hook struct {
	mu    sync.Mutex
	calls map[string]int // by reaction id
	bad   int
	srv   *httptest.Server
}

func newHook(t *testing.T, secret string) *hook {
	k := &hook{calls: map[string]int{}}
	k.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		k.mu.Lock()
		defer k.mu.Unlock()
		if !hmac.Equal([]byte(r.Header.Get(reactions.HeaderSignature)), []byte(reactions.Sign(secret, b))) || r.Header.Get("X-Tag") != "t" {
			k.bad++
		}
		k.calls[r.Header.Get(reactions.HeaderReactionID)]++
	}))
	t.Cleanup(k.srv.Close)
	return k
}

func (k *hook) total() (n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.calls {
		n += c
	}
	return n
}

// reactionEnv is an env whose handler serves reactions with a running
// Engine on s.
func reactionEnv(t *testing.T, s storage.Storage) *env {
	st, err := eventstore.New(s, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, nil)
	eng, err := reactions.New(st, s, &reactions.Options{Outbound: &reactions.Outbound{AllowAll: true}, Backoff: 10 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = eng.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	h := httpapi.New(st, p, &httpapi.Options{Keys: []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}, Reactions: eng})
	return &env{t: t, st: st, p: p, h: h}
}

func reactionDef(name, target, extra string) string {
	return `{"reactionName":"` + name + `","feedName":"order","reactOnEventType":"placed","cancelOnEventTypes":["paid"],` + extra +
		`"action":{"actionType":"HTTP_POST","targetUri":"` + target + `","signingSecret":"k","httpHeaders":{"X-Tag":"t"}}}`
}

type reactionList struct {
	Reactions []struct {
		ReactionID string `json:"reactionId"`
		Status     string `json:"status"`
		FinishedAt *int64 `json:"finishedAt"`
	} `json:"reactions"`
	HasMore    bool  `json:"hasMore"`
	TotalCount int64 `json:"totalCount"`
}

func (e *env) reactions(query string) reactionList {
	e.t.Helper()
	var l reactionList
	require.NoError(e.t, json.Unmarshal([]byte(readBody(e.t, e.must(200, "GET", "/reactions"+query, ""))), &l))
	return l
}

func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	require.Eventually(e.t, cond, 10*time.Second, 10*time.Millisecond, what)
}

func TestReactionsHTTP(t *testing.T) {
	k := newHook(t, "k")
	e := reactionEnv(t, memory.New())

	e.must(200, "POST", "/reactions/definitions", reactionDef("now", k.srv.URL, ""))
	e.must(409, "POST", "/reactions/definitions", reactionDef("now", k.srv.URL, ""))
	e.must(400, "PUT", "/reactions/definitions/other", reactionDef("now", k.srv.URL, ""))
	res := e.must(422, "POST", "/reactions/definitions", reactionDef("x", k.srv.URL, `"offset":"P1M",`))
	assert.Contains(t, readBody(t, res), `"field":"offset"`)
	res = e.must(422, "POST", "/reactions/definitions", reactionDef("x", k.srv.URL, `"offset":5,`))
	assert.Contains(t, readBody(t, res), `"field":"offset"`)
	e.must(400, "POST", "/reactions/definitions", `{"reactionName":`)
	e.must(200, "PUT", "/reactions/definitions/later", reactionDef("later", k.srv.URL, `"offset":"PT1H",`))
	body := readBody(t, e.must(200, "GET", "/reactions/definitions/later", ""))
	assert.NotContains(t, body, `"signingSecret"`, "the secret is never shown")
	assert.Contains(t, readBody(t, e.must(200, "GET", "/reactions/definitions?limit=1", "")), `"hasMore":true,"totalCount":2`)

	e.must(200, "POST", "/aggregates/order/o-1/events", `{"events":[{"eventId":"`+eventstore.NewEventID()+`","eventType":"placed","data":{}}]}`)
	e.eventually("delivered", func() bool { return e.reactions("?status=COMPLETED").TotalCount == 1 })
	e.eventually("scheduled", func() bool { return e.reactions("?status=SCHEDULED").TotalCount == 1 })
	assert.Equal(t, 1, k.total())
	assert.Equal(t, 0, k.bad, "signed over the exact body, with the definition's headers")

	// Execute runs a completed reaction again; cancel a scheduled one.
	done := e.reactions("?status=COMPLETED").Reactions[0]
	assert.NotNil(t, done.FinishedAt)
	e.must(200, "POST", "/reactions/"+done.ReactionID+"/execute", "")
	e.eventually("delivered again", func() bool { return k.total() == 2 })
	later := e.reactions("?status=SCHEDULED").Reactions[0]
	e.must(200, "DELETE", "/reactions/"+later.ReactionID, "")
	e.must(409, "DELETE", "/reactions/"+later.ReactionID, "")
	for _, m := range []string{"DELETE", "GET"} {
		if b := mustErr(t, e.do(m, "/reactions/nope", ""), 404, "not_found"); b.Message != `reaction "nope" was not found` {
			t.Errorf("%s /reactions/nope: %q, want the reaction named", m, b.Message)
		}
	}
	if b := mustErr(t, e.do("POST", "/reactions/nope/execute", ""), 404, "not_found"); b.Message != `reaction "nope" was not found` {
		t.Errorf("POST /reactions/nope/execute: %q, want the reaction named", b.Message)
	}
	e.must(404, "POST", "/reactions/nope/other", "")
	assert.Equal(t, "CANCELED", e.reactions("?reactionName=later").Reactions[0].Status)

	// A paid order cancels its pending reaction; deleting the aggregate
	// removes its reactions.
	e.must(200, "POST", "/aggregates/order/o-2/events", `{"events":[{"eventId":"`+eventstore.NewEventID()+`","eventType":"placed"}]}`)
	e.eventually("scheduled", func() bool { return e.reactions("?status=SCHEDULED&aggregateId=o-2").TotalCount == 1 })
	e.must(200, "POST", "/aggregates/order/o-2/events", `{"events":[{"eventId":"`+eventstore.NewEventID()+`","eventType":"paid"}]}`)
	e.eventually("cancelled", func() bool { return e.reactions("?status=CANCELED&aggregateId=o-2").TotalCount == 1 })
	var tok struct{ DeleteToken string }
	require.NoError(t, json.Unmarshal([]byte(readBody(t, e.must(200, "DELETE", "/aggregates/order/o-2", ""))), &tok))
	e.must(204, "DELETE", "/aggregates/order/o-2?deleteToken="+tok.DeleteToken, "")
	assert.Equal(t, int64(0), e.reactions("?aggregateId=o-2").TotalCount)

	for _, q := range []string{"?status=NOPE", "?limit=5000", "?skip=-1", "?from=yesterday", "?bogus=1", "?aggregateId=" + strings.Repeat("a", 300)} {
		e.must(400, "GET", "/reactions"+q, "")
	}
	e.must(200, "DELETE", "/reactions/definitions/later", "")
	for _, m := range []string{"GET", "DELETE"} {
		if b := mustErr(t, e.do(m, "/reactions/definitions/later", ""), 404, "not_found"); b.Message != `reaction definition "later" was not found` {
			t.Errorf("%s /reactions/definitions/later: %q, want the reaction definition named", m, b.Message)
		}
	}
}

func TestReactionsNotEnabled(t *testing.T) {
	e := newEnv(t, nil)
	res := e.must(404, "GET", "/reactions", "")
	assert.Contains(t, readBody(t, res), "not enabled")
}
