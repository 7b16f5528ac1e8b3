package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/internal/benchstorage"
	"github.com/google/uuid"
)

// Shape of the save/load benchmark: loads read one of loadAggregates
// aggregates of loadVersions versions, one event each.
const (
	loadAggregates = 64
	loadVersions   = 5
	benchEventData = `{"total":"12.50","city":"Lyon","items":[1,2,3],"note":"gift <wrapped>"}`
)

// BenchmarkHTTPSaveLoad measures saves (POST /aggregates/order/{id}/events
// of one event to a new aggregate) and loads (GET /aggregates/order/{id}
// of five versions) over a real loopback TCP server, with 1 and 16
// concurrent clients on keep-alive connections.
//
// paired compares httpapi on the memory backend (ours) with baseline, a
// handler that decodes the same body into structs with encoding/json and
// keeps events in a map under a mutex (a load reads the map and encodes
// with encoding/json). Both servers run at once and the clients
// alternate between them in phases of a few hundred requests, so that a
// change in the load of a shared machine hits both alike; it reports
// ours-ns/op, baseline-ns/op and ours/baseline, the ratio of their
// throughputs (1 is as fast as the baseline). ours-sqlite and
// ours-postgres are httpapi on those backends alone, for reference.
func BenchmarkHTTPSaveLoad(b *testing.B) {
	for _, op := range []string{"save", "load"} {
		for _, clients := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/clients=%d/paired", op, clients), func(b *testing.B) {
				targets := [2]*benchTarget{
					newBenchTarget(b, newBaselineHandler(), op),
					newBenchTarget(b, oursHandler(b, benchstorage.All[0]), op),
				}
				phase := 64 * clients
				var spent [2]time.Duration
				var done [2]int
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; done[0]+done[1] < b.N; i++ {
					n := min(phase, b.N-done[0]-done[1])
					start := time.Now()
					targets[i%2].run(b, clients, n)
					spent[i%2] += time.Since(start)
					done[i%2] += n
				}
				if done[0] == 0 || done[1] == 0 {
					return // b.N too small to time both
				}
				base := float64(spent[0]) / float64(done[0])
				ours := float64(spent[1]) / float64(done[1])
				b.ReportMetric(base, "baseline-ns/op")
				b.ReportMetric(ours, "ours-ns/op")
				b.ReportMetric(base/ours, "ours/baseline")
			})
			for _, be := range benchstorage.All[1:] {
				b.Run(fmt.Sprintf("%s/clients=%d/ours-%s", op, clients, be.Name), func(b *testing.B) {
					t := newBenchTarget(b, oursHandler(b, be), op)
					b.ReportAllocs()
					b.ResetTimer()
					t.run(b, clients, b.N)
				})
			}
		}
	}
}

// benchTarget is a loopback server with its client, preloaded with the
// aggregates the loads read.
type benchTarget struct {
	url  string
	c    *http.Client
	op   string
	next atomic.Int64
}

func newBenchTarget(b *testing.B, h http.Handler, op string) *benchTarget {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	// Without compression: the baseline does not compress, and ours would
	// gzip a load of 1 KiB or more when the client accepts it.
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64, DisableCompression: true}}
	b.Cleanup(c.CloseIdleConnections)
	for i := range loadAggregates {
		for range loadVersions {
			mustDo(b, c, saveRequest(b, srv.URL, "l-"+strconv.Itoa(i)), http.StatusOK)
		}
	}
	return &benchTarget{url: srv.URL, c: c, op: op}
}

// run sends n requests from clients concurrent clients.
func (t *benchTarget) run(b *testing.B, clients, n int) {
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range min(clients, n) {
		wg.Go(func() {
			for sent.Add(1) <= int64(n) {
				k := t.next.Add(1)
				if t.op == "save" {
					mustDo(b, t.c, saveRequest(b, t.url, "s-"+strconv.FormatInt(k, 10)), http.StatusOK)
				} else {
					mustDo(b, t.c, loadRequest(b, t.url, "l-"+strconv.FormatInt(k%loadAggregates, 10)), http.StatusOK)
				}
			}
		})
	}
	wg.Wait()
}

func oursHandler(b *testing.B, be benchstorage.Backend) http.Handler {
	st, err := eventstore.New(be.Open(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	return httpapi.New(st, eventstore.NewProjector(st, nil), &httpapi.Options{Keys: []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}})
}

func saveRequest(b *testing.B, url, id string) *http.Request {
	body := `{"events":[{"eventId":"` + uuid.NewString() + `","eventType":"OrderPlaced","data":` + benchEventData + `}]}`
	r, err := http.NewRequest("POST", url+"/aggregates/order/"+id+"/events", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(httpapi.HeaderAccessKey, testAccess)
	r.Header.Set(httpapi.HeaderSecretAccessKey, testSecret)
	return r
}

func loadRequest(b *testing.B, url, id string) *http.Request {
	r, err := http.NewRequest("GET", url+"/aggregates/order/"+id, nil)
	if err != nil {
		b.Fatal(err)
	}
	r.Header.Set(httpapi.HeaderAccessKey, testAccess)
	r.Header.Set(httpapi.HeaderSecretAccessKey, testSecret)
	return r
}

// mustDo sends r, reads the whole body and checks the status.
func mustDo(b *testing.B, c *http.Client, r *http.Request, want int) {
	resp, err := c.Do(r)
	if err != nil {
		b.Fatal(err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != want {
		b.Fatalf("%s %s: status %d, %v", r.Method, r.URL.Path, resp.StatusCode, err)
	}
}

// baselineHandler is the floor the save/load benchmark compares with:
// encoding/json into structs of the same shape, a map under a mutex.
type baselineHandler struct {
	mu   sync.Mutex
	aggs map[string][]baselineEvent
	pos  int64
}

type baselineEvent struct {
	EventID    string          `json:"eventId"`
	EventType  string          `json:"eventType"`
	Data       json.RawMessage `json:"data,omitempty"`
	Version    int64           `json:"version"`
	Sequence   int64           `json:"sequence"`
	Position   int64           `json:"position"`
	RecordedAt int64           `json:"recordedAt"`
}

func newBaselineHandler() *baselineHandler {
	return &baselineHandler{aggs: map[string][]baselineEvent{}}
}

func (h *baselineHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/aggregates/")
	typ, rest, _ := strings.Cut(rest, "/")
	id, tail, _ := strings.Cut(rest, "/")
	key := typ + "/" + id
	switch {
	case !ok:
		http.NotFound(w, r)
	case r.Method == http.MethodPost && tail == "events":
		var req struct {
			Events []struct {
				EventID   string          `json:"eventId"`
				EventType string          `json:"eventType"`
				Data      json.RawMessage `json:"data"`
			} `json:"events"`
			ExpectedVersion *int64  `json:"expectedVersion"`
			AggregateID     *string `json:"aggregateId"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, httpapi.DefaultMaxBodyBytes)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		now := time.Now().UnixMilli()
		h.mu.Lock()
		evs := h.aggs[key]
		version := int64(1)
		if len(evs) > 0 {
			version = evs[len(evs)-1].Version + 1
		}
		for _, e := range req.Events {
			h.pos++
			evs = append(evs, baselineEvent{EventID: e.EventID, EventType: e.EventType, Data: e.Data,
				Version: version, Sequence: int64(len(evs) + 1), Position: h.pos, RecordedAt: now})
		}
		h.aggs[key] = evs
		h.mu.Unlock()
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodGet && tail == "":
		h.mu.Lock()
		evs := h.aggs[key]
		h.mu.Unlock()
		out := struct {
			AggregateID      string          `json:"aggregateId"`
			AggregateType    string          `json:"aggregateType"`
			AggregateVersion int64           `json:"aggregateVersion"`
			Events           []baselineEvent `json:"events"`
			HasMore          bool            `json:"hasMore"`
		}{AggregateID: id, AggregateType: typ, Events: evs[:len(evs):len(evs)]}
		if len(evs) > 0 {
			out.AggregateVersion = evs[len(evs)-1].Version
		}
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(out); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(buf.Bytes())
	default:
		http.NotFound(w, r)
	}
}

// BenchmarkHandlerSaveLoad serves the requests of BenchmarkHTTPSaveLoad
// (one client) to the handlers directly, with httptest.ResponseRecorder:
// the handlers' own CPU cost, without the network and the client, which
// dominate over TCP. Compare ours with baseline of the same run.
func BenchmarkHandlerSaveLoad(b *testing.B) {
	for _, op := range []string{"save", "load"} {
		for _, s := range []struct {
			name string
			h    func(b *testing.B) http.Handler
		}{
			{"baseline", func(b *testing.B) http.Handler { return newBaselineHandler() }},
			{"ours", func(b *testing.B) http.Handler { return oursHandler(b, benchstorage.All[0]) }},
		} {
			b.Run(op+"/"+s.name, func(b *testing.B) {
				h := s.h(b)
				serve := func(r *http.Request) {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != http.StatusOK {
						b.Fatalf("%s %s: status %d: %s", r.Method, r.URL.Path, w.Code, w.Body)
					}
				}
				for i := range loadAggregates {
					for range loadVersions {
						serve(saveRequest(b, "", "l-"+strconv.Itoa(i)))
					}
				}
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					n++
					if op == "save" {
						serve(saveRequest(b, "", "s-"+strconv.Itoa(n)))
					} else {
						serve(loadRequest(b, "", "l-"+strconv.Itoa(n%loadAggregates)))
					}
				}
			})
		}
	}
}
