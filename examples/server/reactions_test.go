package main

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/reactions"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// reactionReceiver counts the deliveries of each reaction id and checks
// their signatures.
type reactionReceiver struct {
	mu    sync.Mutex
	seen  map[string]int
	bad   int
	delay time.Duration
	srv   *httptest.Server
}

func newReactionReceiver(t *testing.T, secret string, delay time.Duration) *reactionReceiver {
	rr := &reactionReceiver{seen: map[string]int{}, delay: delay}
	rr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		time.Sleep(rr.delay)
		rr.mu.Lock()
		defer rr.mu.Unlock()
		if !hmac.Equal([]byte(r.Header.Get(reactions.HeaderSignature)), []byte(reactions.Sign(secret, b))) {
			rr.bad++
		}
		rr.seen[r.Header.Get(reactions.HeaderReactionID)]++
	}))
	t.Cleanup(rr.srv.Close)
	return rr
}

func (rr *reactionReceiver) counts() (distinct, total, repeats, bad int) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for _, n := range rr.seen {
		total += n
		if n > 1 {
			repeats++
		}
	}
	return len(rr.seen), total, repeats, rr.bad
}

// apiClient calls a server process with a key pair.
type apiClient struct {
	t              *testing.T
	access, secret string
	http           *http.Client
}

func (c *apiClient) do(method, url, body string) (int, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Serialized-Access-Key", c.access)
	req.Header.Set("Serialized-Secret-Access-Key", c.secret)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

func (c *apiClient) must(want int, method, url, body string) string {
	c.t.Helper()
	code, out := c.do(method, url, body)
	if code != want {
		c.t.Fatalf("%s %s: %d %s, want %d", method, url, code, out, want)
	}
	return out
}

func (c *apiClient) save(base, id, typ string) {
	c.t.Helper()
	c.must(200, "POST", base+"/aggregates/order/"+id+"/events",
		`{"events":[{"eventId":"`+uuid.NewString()+`","eventType":"`+typ+`","data":{"n":1}}]}`)
}

func reactionDefJSON(name, target, offset string) string {
	return fmt.Sprintf(`{"reactionName":%q,"feedName":"order","reactOnEventType":"Placed","cancelOnEventTypes":["Paid"],"offset":%q,`+
		`"action":{"actionType":"HTTP_POST","targetUri":%q,"signingSecret":"whsec"}}`, name, offset, target)
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestReactionsTwoServerProcessesOnePostgres: two server processes on one
// PostgreSQL schema both follow the feed and deliver; a receiver that
// answers 200 sees each of 300 reactions exactly once, and both servers
// list them all COMPLETED.
func TestReactionsTwoServerProcessesOnePostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	ctx := context.Background()
	admin, url, schema := postgresAdmin(t, "es_reactions_")
	t.Cleanup(func() {
		for _, s := range []string{schema, schema + "+tenants"} {
			_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
		}
	})
	rr := newReactionReceiver(t, "whsec", 2*time.Millisecond)
	c := &apiClient{t: t, access: "ak_rx", secret: "sk_rx", http: &http.Client{Timeout: 30 * time.Second}}
	env := []string{"EVENTSTORE_ACCESS_KEY=" + c.access, "EVENTSTORE_SECRET_ACCESS_KEY=" + c.secret}
	args := []string{"-addr", "127.0.0.1:0", "-storage", url, "-postgres-schema", schema, "-log-requests=false",
		"-outbound-allow", "127.0.0.1/32", "-reaction-backoff", "200ms"}
	a := startProcess(t, env, args...)
	b := startProcess(t, env, args...)

	// Loopback is refused unless allowed: a server without the flag says so.
	c.must(200, "POST", a.base+"/reactions/definitions", reactionDefJSON("notify", rr.srv.URL, "PT0S"))
	const n = 300
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			base := []string{a.base, b.base}[w%2]
			for i := w; i < n; i += 6 {
				c.save(base, fmt.Sprintf("o-%d", i), "Placed")
			}
		})
	}
	wg.Wait()
	waitUntil(t, 60*time.Second, "every reaction delivered", func() bool { d, _, _, _ := rr.counts(); return d >= n })
	time.Sleep(time.Second) // room for a second delivery, should one come
	distinct, total, repeats, bad := rr.counts()
	if distinct != n || total != n || repeats != 0 || bad != 0 {
		t.Fatalf("receiver saw %d reactions in %d calls (%d repeated, %d badly signed), want %d once each", distinct, total, repeats, bad, n)
	}
	for _, base := range []string{a.base, b.base} {
		var l struct{ TotalCount int }
		if err := json.Unmarshal([]byte(c.must(200, "GET", base+"/reactions?status=COMPLETED&limit=0", "")), &l); err != nil || l.TotalCount != n {
			t.Errorf("%s lists %d COMPLETED reactions (%v), want %d", base, l.TotalCount, err, n)
		}
	}
}

// TestReactionsSurviveACrash: a reaction due while the only server is
// down (killed with SIGKILL) is delivered when it runs again, and one
// cancelled before the crash never is; a loopback target is refused
// without -outbound-allow.
func TestReactionsSurviveACrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	rr := newReactionReceiver(t, "whsec", 0)
	c := &apiClient{t: t, access: "ak_rx", secret: "sk_rx", http: &http.Client{Timeout: 30 * time.Second}}
	env := []string{"EVENTSTORE_ACCESS_KEY=" + c.access, "EVENTSTORE_SECRET_ACCESS_KEY=" + c.secret}
	db := "sqlite:" + filepath.Join(t.TempDir(), "rx.db")

	strict := startProcess(t, env, "-addr", "127.0.0.1:0", "-storage", db, "-log-requests=false")
	code, body := c.do("POST", strict.base+"/reactions/definitions", reactionDefJSON("remind", rr.srv.URL, "PT2S"))
	if code != 422 || !strings.Contains(body, "action.targetUri") {
		t.Errorf("a loopback target without -outbound-allow: %d %s, want 422 naming action.targetUri", code, body)
	}
	strict.kill()

	args := []string{"-addr", "127.0.0.1:0", "-storage", db, "-log-requests=false", "-outbound-allow", "127.0.0.1"}
	s := startProcess(t, env, args...)
	c.must(200, "POST", s.base+"/reactions/definitions", reactionDefJSON("remind", rr.srv.URL, "PT2S"))
	c.save(s.base, "o-1", "Placed")
	c.save(s.base, "o-2", "Placed")
	waitUntil(t, 10*time.Second, "two scheduled", func() bool {
		return strings.Contains(c.must(200, "GET", s.base+"/reactions?status=SCHEDULED&limit=0", ""), `"totalCount":2`)
	})
	c.save(s.base, "o-2", "Paid")
	waitUntil(t, 10*time.Second, "one cancelled", func() bool {
		return strings.Contains(c.must(200, "GET", s.base+"/reactions?status=CANCELED&limit=0", ""), `"totalCount":1`)
	})
	s.kill()
	time.Sleep(3 * time.Second) // o-1's reaction falls due while no server runs
	if d, _, _, _ := rr.counts(); d != 0 {
		t.Fatalf("delivered %d before the restart", d)
	}
	s = startProcess(t, env, args...)
	waitUntil(t, 15*time.Second, "delivered after the restart", func() bool { d, _, _, _ := rr.counts(); return d == 1 })
	waitUntil(t, 10*time.Second, "completed", func() bool {
		return strings.Contains(c.must(200, "GET", s.base+"/reactions?status=COMPLETED&aggregateId=o-1&limit=0", ""), `"totalCount":1`)
	})
	time.Sleep(500 * time.Millisecond)
	if d, total, _, bad := rr.counts(); d != 1 || total != 1 || bad != 0 {
		t.Errorf("receiver saw %d reactions in %d calls, %d badly signed; want o-1's once", d, total, bad)
	}
}
