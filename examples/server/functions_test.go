package main

import (
	"crypto/hmac"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/reactions"
	"github.com/tidwall/gjson"
)

// TestExternalFunctionServer: the server calls a projection's functionUri
// under -outbound-allow, signed with the definition's signingSecret; a
// loopback target is refused without it.
func TestExternalFunctionServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	fn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !hmac.Equal([]byte(r.Header.Get(reactions.HeaderSignature)), []byte(reactions.Sign("whsec", b))) {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		n := gjson.GetBytes(b, "currentState.n").Int() + gjson.GetBytes(b, "event.data.n").Int()
		_, _ = io.WriteString(w, `{"updatedState":{"n":`+strconv.FormatInt(n, 10)+`}}`)
	}))
	defer fn.Close()
	c := &apiClient{t: t, access: "ak_fn", secret: "sk_fn", http: &http.Client{Timeout: 30 * time.Second}}
	env := []string{"EVENTSTORE_ACCESS_KEY=" + c.access, "EVENTSTORE_SECRET_ACCESS_KEY=" + c.secret}
	db := "sqlite:" + filepath.Join(t.TempDir(), "fn.db")
	def := `{"projectionName":"sum","feedName":"order","signingSecret":"whsec",
		"handlers":[{"eventType":"Placed","functionUri":"` + fn.URL + `/fold"}]}`

	strict := startProcess(t, env, "-addr", "127.0.0.1:0", "-storage", db, "-log-requests=false")
	if code, body := c.do("PUT", strict.base+"/projections/definitions/sum", def); code != 422 || !strings.Contains(body, "handlers[0].functionUri") {
		t.Errorf("a loopback functionUri without -outbound-allow: %d %s, want 422 naming it", code, body)
	}
	strict.kill()

	s := startProcess(t, env, "-addr", "127.0.0.1:0", "-storage", db, "-log-requests=false", "-outbound-allow", "127.0.0.1")
	c.must(200, "PUT", s.base+"/projections/definitions/sum", def)
	c.save(s.base, "o-1", "Placed")
	c.save(s.base, "o-1", "Placed")
	if got := c.must(200, "GET", s.base+"/projections/single/sum/o-1", ""); gjson.Get(got, "data.n").Int() != 2 {
		t.Errorf("single: %s, want n 2", got)
	}
}
