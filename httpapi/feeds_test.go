package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/google/uuid"
)

// newFeedEnv is a handler on a fresh in-memory store, with options.
func newFeedEnv(t *testing.T, opts *httpapi.Options) *env {
	t.Helper()
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, nil)
	if opts == nil {
		opts = &httpapi.Options{}
	}
	opts.Keys = []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}
	return &env{t: t, st: st, p: p, h: httpapi.New(st, p, opts)}
}

type feedResp struct {
	Entries []struct {
		SequenceNumber int64  `json:"sequenceNumber"`
		AggregateID    string `json:"aggregateId"`
		AggregateType  string `json:"aggregateType"`
		FeedName       string `json:"feedName"`
		Timestamp      int64  `json:"timestamp"`
		Events         []struct {
			EventID       string          `json:"eventId"`
			EventType     string          `json:"eventType"`
			Data          json.RawMessage `json:"data"`
			EncryptedData string          `json:"encryptedData"`
			Version       int64           `json:"version"`
		} `json:"events"`
	} `json:"entries"`
	HasMore               bool  `json:"hasMore"`
	CurrentSequenceNumber int64 `json:"currentSequenceNumber"`
}

func (e *env) feed(path string) feedResp {
	e.t.Helper()
	var f feedResp
	if err := json.Unmarshal([]byte(readBody(e.t, e.must(200, "GET", path, ""))), &f); err != nil {
		e.t.Fatal(err)
	}
	return f
}

func newID() string { return uuid.NewString() }

func saveN(e *env, typ, id string, n int) {
	e.t.Helper()
	evs := make([]string, n)
	for i := range evs {
		evs[i] = ev(newID(), "Happened", fmt.Sprintf(`{"i":%d}`, i))
	}
	e.must(200, "POST", "/aggregates/"+typ+"/"+id+"/events", events(evs...))
}

func (f feedResp) ids() string {
	var s []string
	for _, e := range f.Entries {
		s = append(s, fmt.Sprint(e.AggregateType, "/", e.AggregateID, ":", len(e.Events)))
	}
	return strings.Join(s, " ")
}

func TestFeeds(t *testing.T) {
	e := newFeedEnv(t, nil)
	mustErr(t, e.do("GET", "/feeds/order", ""), 404, "not_found")
	mustErr(t, e.do("HEAD", "/feeds/order", ""), 404, "not_found")
	if f := e.feed("/feeds/_all"); len(f.Entries) != 0 || f.HasMore || f.CurrentSequenceNumber != 0 {
		t.Errorf("empty _all: %+v", f)
	}
	if b := readBody(t, e.must(200, "GET", "/feeds", "")); b != `{"feeds":[]}`+"\n" {
		t.Errorf("GET /feeds of an empty store: %s", b)
	}
	before := time.Now().UnixMilli()
	saveN(e, "order", "o-1", 2)
	saveN(e, "user", "u-1", 1)
	saveN(e, "order", "o-2", 3)
	saveN(e, "order", "o-1", 1)

	f := e.feed("/feeds/order")
	if got := f.ids(); got != "order/o-1:2 order/o-2:3 order/o-1:1" {
		t.Errorf("feed order: %s", got)
	}
	for i, en := range f.Entries {
		if en.SequenceNumber != int64(i+1) || en.FeedName != "order" || en.Timestamp < before || en.Timestamp > time.Now().UnixMilli() {
			t.Errorf("entry %d: %+v", i, en)
		}
	}
	if f.CurrentSequenceNumber != 3 || f.HasMore {
		t.Errorf("feed order: current %d hasMore %v", f.CurrentSequenceNumber, f.HasMore)
	}
	if v := f.Entries[2].Events[0].Version; v != 2 {
		t.Errorf("the third batch is o-1's version 2, got %d", v)
	}
	head := e.must(200, "HEAD", "/feeds/order", "")
	if h := head.Header.Get(httpapi.HeaderSequenceNumber); h != "3" {
		t.Errorf("HEAD /feeds/order: %q", h)
	}
	all := e.feed("/feeds/_all")
	if got := all.ids(); got != "order/o-1:2 user/u-1:1 order/o-2:3 order/o-1:1" {
		t.Errorf("_all: %s", got)
	}
	if all.CurrentSequenceNumber != 7 || all.Entries[3].SequenceNumber != 7 || all.Entries[0].SequenceNumber != 2 {
		t.Errorf("_all numbers: %+v", all)
	}
	if h := e.must(200, "HEAD", "/feeds/_all", "").Header.Get(httpapi.HeaderSequenceNumber); h != "7" {
		t.Errorf("HEAD /feeds/_all: %q", h)
	}
	// since, limit, hasMore.
	f = e.feed("/feeds/order?since=1&limit=1")
	if f.ids() != "order/o-2:3" || !f.HasMore {
		t.Errorf("since=1&limit=1: %s %v", f.ids(), f.HasMore)
	}
	f = e.feed("/feeds/_all?since=3")
	if f.ids() != "order/o-2:3 order/o-1:1" || f.HasMore {
		t.Errorf("_all since=3: %s", f.ids())
	}
	// filterType and partitions.
	if got := e.feed("/feeds/_all?filterType=user&filterType=nothing").ids(); got != "user/u-1:1" {
		t.Errorf("filterType: %s", got)
	}
	var parts []string
	for n := range 2 {
		parts = append(parts, e.feed("/feeds/order?partitionCount=2&partitionNumber="+strconv.Itoa(n)).ids())
	}
	want := map[int]string{}
	for _, id := range []string{"o-1", "o-2"} {
		p := eventstore.Partition(id, 2)
		if id == "o-1" {
			want[p] = strings.TrimSpace(want[p] + " order/o-1:2")
		} else {
			want[p] = strings.TrimSpace(want[p] + " order/o-2:3")
		}
	}
	want[eventstore.Partition("o-1", 2)] += " order/o-1:1"
	for n := range 2 {
		if strings.TrimSpace(parts[n]) != strings.TrimSpace(want[n]) {
			t.Errorf("partition %d: %q, want %q", n, parts[n], want[n])
		}
	}

	var list struct {
		Feeds []map[string]any `json:"feeds"`
	}
	if err := json.Unmarshal([]byte(readBody(t, e.must(200, "GET", "/feeds", ""))), &list); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(list.Feeds); got != "[map[aggregateCount:2 aggregateType:order batchCount:3 eventCount:6] map[aggregateCount:1 aggregateType:user batchCount:1 eventCount:1]]" {
		t.Errorf("GET /feeds: %s", got)
	}
}

func TestFeedBadParams(t *testing.T) {
	e := newFeedEnv(t, nil)
	saveN(e, "order", "o-1", 1)
	for _, c := range []struct{ query, param string }{
		{"since=x", "since"},
		{"since=-1", "since"},
		{"since=1&since=2", "since"},
		{"since=99999999999999999999", "since"},
		{"limit=0", "limit"},
		{"limit=1001", "limit"},
		{"limit=1.5", "limit"},
		{"waitTime=60001", "waitTime"},
		{"waitTime=-5", "waitTime"},
		{"waitTime=soon", "waitTime"},
		{"partitionCount=2", "partitionCount"},
		{"partitionNumber=0", "partitionCount"},
		{"partitionCount=0&partitionNumber=0", "partitionCount"},
		{"partitionCount=1001&partitionNumber=0", "partitionCount"},
		{"partitionCount=2&partitionNumber=2", "partitionNumber"},
		{"partitionCount=2&partitionNumber=-1", "partitionNumber"},
		{"filterType=a%2Fb", "filterType"},
	} {
		b := mustErr(t, e.do("GET", "/feeds/_all?"+c.query, ""), 400, "malformed")
		if !hasField(b.Errors, c.param) || !strings.Contains(b.Message, c.param) {
			t.Errorf("%s: %+v does not name %s", c.query, b, c.param)
		}
	}
	b := mustErr(t, e.do("GET", "/feeds/order?filterType=user", ""), 400, "malformed")
	if !hasField(b.Errors, "filterType") {
		t.Errorf("filterType on a type's feed: %+v", b)
	}
	for _, q := range []string{"since=x", "limit=0", "limit=1001", "since=-1"} {
		b := mustErr(t, e.do("GET", "/aggregates/order/o-1?"+q, ""), 400, "malformed")
		if param, _, _ := strings.Cut(q, "="); !hasField(b.Errors, param) {
			t.Errorf("load %s: %+v", q, b)
		}
	}
}

func TestFeedLongPoll(t *testing.T) {
	e := newFeedEnv(t, nil)
	saveN(e, "order", "o-1", 1)
	start := time.Now()
	f := e.feed("/feeds/order?since=1&waitTime=100")
	if len(f.Entries) != 0 || time.Since(start) < 100*time.Millisecond {
		t.Errorf("a long poll with nothing new: %d entries after %v", len(f.Entries), time.Since(start))
	}
	go func() {
		time.Sleep(30 * time.Millisecond)
		saveN(e, "order", "o-2", 2)
	}()
	start = time.Now()
	f = e.feed("/feeds/order?since=1&waitTime=60000")
	if f.ids() != "order/o-2:2" || time.Since(start) > 5*time.Second {
		t.Errorf("long poll: %s after %v", f.ids(), time.Since(start))
	}
	// Past the bound of waiting polls, a poll answers at once.
	e2 := newFeedEnv(t, &httpapi.Options{MaxLongPolls: 1})
	saveN(e2, "order", "o-1", 1)
	done := make(chan struct{})
	go func() { e2.feed("/feeds/order?since=1&waitTime=300"); close(done) }()
	time.Sleep(50 * time.Millisecond)
	start = time.Now()
	e2.feed("/feeds/order?since=1&waitTime=60000")
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Errorf("a poll beyond MaxLongPolls waited %v", d)
	}
	<-done
}

// TestFeedPagingUnderConcurrentWriters pages through _all and one type's
// feed with since while writers save over HTTP: every batch is seen once,
// in order.
func TestFeedPagingUnderConcurrentWriters(t *testing.T) {
	e := newFeedEnv(t, nil)
	const writers, saves = 6, 30
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]string{} // first event id -> type
	for w := range writers {
		wg.Go(func() {
			for i := range saves {
				typ := []string{"a", "b"}[(w+i)%2]
				ids := []string{newID(), newID()}
				body := events(ev(ids[0], "X", ""), ev(ids[1], "Y", ""))
				res := e.do("POST", fmt.Sprintf("/aggregates/%s/w%d-%d/events", typ, w, i%3), body)
				if res.StatusCode != 200 {
					t.Errorf("save: %d", res.StatusCode)
					return
				}
				mu.Lock()
				acked[ids[0]] = typ
				mu.Unlock()
			}
		})
	}
	read := func(feed string, want int) map[string]bool {
		seen := map[string]bool{}
		since := int64(0)
		deadline := time.Now().Add(20 * time.Second)
		for len(seen) < want && time.Now().Before(deadline) {
			res := e.do("GET", fmt.Sprintf("/feeds/%s?since=%d&limit=7&waitTime=200", feed, since), "")
			if res.StatusCode == 404 {
				continue // the type has no events yet
			}
			var f feedResp
			if err := json.Unmarshal([]byte(readBody(t, res)), &f); err != nil {
				t.Fatal(err)
			}
			for _, en := range f.Entries {
				if en.SequenceNumber <= since {
					t.Fatalf("%s: sequence number %d after %d", feed, en.SequenceNumber, since)
				}
				since = en.SequenceNumber
				if len(en.Events) != 2 {
					t.Errorf("%s: a batch of %d events", feed, len(en.Events))
				}
				id := en.Events[0].EventID
				if seen[id] {
					t.Errorf("%s: batch %s seen twice", feed, id)
				}
				seen[id] = true
			}
		}
		return seen
	}
	var all, onlyA map[string]bool
	var rg sync.WaitGroup
	rg.Go(func() { all = read("_all", writers*saves) })
	rg.Go(func() { onlyA = read("a", writers*saves/2) })
	wg.Wait()
	rg.Wait()
	for id, typ := range acked {
		if !all[id] {
			t.Errorf("_all skipped batch %s", id)
		}
		if typ == "a" && !onlyA[id] {
			t.Errorf("feed a skipped batch %s", id)
		}
	}
	if len(all) != writers*saves || len(onlyA) != writers*saves/2 {
		t.Errorf("seen %d in _all and %d in a", len(all), len(onlyA))
	}
}

func TestBulkSave(t *testing.T) {
	e := newFeedEnv(t, nil)
	batch := func(id string, expected string, evs ...string) string {
		s := `{"aggregateId":"` + id + `","events":[` + strings.Join(evs, ",") + `]`
		if expected != "" {
			s += `,"expectedVersion":` + expected
		}
		return s + "}"
	}
	bulk := func(batches ...string) string { return `{"batches":[` + strings.Join(batches, ",") + `]}` }

	e.must(200, "POST", "/aggregates/acct/events", bulk(batch("a", "0", ev(newID(), "Opened", `{"n":1}`)), batch("b", "", ev(newID(), "Opened", ""), ev(newID(), "X", ""))))
	f := e.feed("/feeds/acct")
	if f.ids() != "acct/a:1 acct/b:2" {
		t.Fatalf("after bulk save: %s", f.ids())
	}
	// The older single form on the same path.
	e.must(200, "POST", "/aggregates/acct/events", `{"aggregateId":"c","events":[`+ev(newID(), "Opened", "")+`]}`)

	// A conflict in one batch: 409 naming it, nothing stored.
	b := mustErr(t, e.do("POST", "/aggregates/acct/events", bulk(batch("d", "", ev(newID(), "Opened", "")), batch("a", "0", ev(newID(), "Again", "")))), 409, "conflict")
	if !strings.Contains(b.Message, "batch 1") || !strings.Contains(b.Message, "acct/a") {
		t.Errorf("409 does not name the batch: %s", b.Message)
	}
	for _, c := range []struct{ name, body, field string }{
		{"mixed forms", `{"batches":[` + batch("d", "", ev(newID(), "X", "")) + `],"events":[]}`, "events"},
		{"mixed forms id", `{"batches":[` + batch("d", "", ev(newID(), "X", "")) + `],"aggregateId":"d"}`, "aggregateId"},
		{"empty batches", `{"batches":[]}`, "batches"},
		{"empty batch", bulk(batch("d", "", ev(newID(), "X", "")), batch("e", "")), "batches[1].events"},
		{"duplicate aggregate", bulk(batch("d", "", ev(newID(), "X", "")), batch("d", "", ev(newID(), "X", ""))), "batches[1].aggregateId"},
		{"batch without id", `{"batches":[{"events":[` + ev(newID(), "X", "") + `]}]}`, "batches[0].aggregateId"},
		{"batch not object", `{"batches":[1]}`, "batches[0]"},
		{"bad event", bulk(batch("d", "", ev("nope", "X", ""))), "batches[0].events[0].eventId"},
		{"bad expected version", bulk(batch("d", `"x"`, ev(newID(), "X", ""))), "batches[0].expectedVersion"},
		{"negative expected version", bulk(batch("d", `-1`, ev(newID(), "X", ""))), "batches[0].expectedVersion"},
		{"single form without id", events(ev(newID(), "X", "")), "aggregateId"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := mustErr(t, e.do("POST", "/aggregates/acct/events", c.body), 422, "invalid")
			if !hasField(b.Errors, c.field) {
				t.Errorf("errors %+v do not name %s", b.Errors, c.field)
			}
		})
	}
	many := make([]string, 1001)
	for i := range many {
		many[i] = batch(fmt.Sprint("m", i), "", ev(newID(), "X", ""))
	}
	mustErr(t, e.do("POST", "/aggregates/acct/events", bulk(many...)), 422, "invalid")
	if f := e.feed("/feeds/acct"); f.ids() != "acct/a:1 acct/b:2 acct/c:1" {
		t.Errorf("refused requests stored something: %s", f.ids())
	}
	// An aggregate whose id is "events" is still reachable.
	e.must(200, "POST", "/aggregates/acct/events/events", events(ev(newID(), "X", "")))
	e.must(200, "GET", "/aggregates/acct/events", "")
	e.must(200, "HEAD", "/aggregates/acct/events", "")
}

func TestLoadRangeHTTP(t *testing.T) {
	e := newFeedEnv(t, nil)
	for range 5 {
		saveN(e, "acct", "a", 2)
	}
	var agg struct {
		AggregateVersion int64 `json:"aggregateVersion"`
		HasMore          bool  `json:"hasMore"`
		Events           []struct {
			Version int64 `json:"version"`
		} `json:"events"`
	}
	load := func(q string) string {
		t.Helper()
		agg.Events = nil
		if err := json.Unmarshal([]byte(readBody(t, e.must(200, "GET", "/aggregates/acct/a"+q, ""))), &agg); err != nil {
			t.Fatal(err)
		}
		var vs []string
		for _, ev := range agg.Events {
			vs = append(vs, strconv.FormatInt(ev.Version, 10))
		}
		return fmt.Sprintf("%s v%d more=%v", strings.Join(vs, ","), agg.AggregateVersion, agg.HasMore)
	}
	for q, want := range map[string]string{
		"":                  "1,1,2,2,3,3,4,4,5,5 v5 more=false",
		"?since=2":          "3,3,4,4,5,5 v5 more=false",
		"?limit=2":          "1,1,2,2 v5 more=true",
		"?since=3&limit=1":  "4,4 v5 more=true",
		"?since=4&limit=10": "5,5 v5 more=false",
		"?since=5":          " v5 more=false",
	} {
		if got := load(q); got != want {
			t.Errorf("load%s: %s, want %s", q, got, want)
		}
	}
}

func TestDeleteWithTokens(t *testing.T) {
	e := newFeedEnv(t, nil)
	other := newFeedEnv(t, nil) // another handler: another key
	now := time.Now()
	httpapi.SetTokenClock(e.h, func() time.Time { return now })
	saveN(e, "acct", "a", 1)
	saveN(e, "acct", "b", 1)
	saveN(e, "user", "u", 1)
	token := func(path string) string {
		t.Helper()
		var tok struct {
			DeleteToken string `json:"deleteToken"`
		}
		if err := json.Unmarshal([]byte(readBody(t, e.must(200, "DELETE", path, ""))), &tok); err != nil || tok.DeleteToken == "" {
			t.Fatalf("no token: %v", err)
		}
		return tok.DeleteToken
	}
	mustErr(t, e.do("DELETE", "/aggregates/acct/zzz", ""), 404, "not_found")
	mustErr(t, e.do("DELETE", "/aggregates/nothing", ""), 404, "not_found")
	tokA := token("/aggregates/acct/a")
	tokType := token("/aggregates/acct")
	otherTok := func() string {
		saveN(other, "acct", "a", 1)
		var tok struct {
			DeleteToken string `json:"deleteToken"`
		}
		_ = json.Unmarshal([]byte(readBody(t, other.must(200, "DELETE", "/aggregates/acct/a", ""))), &tok)
		return tok.DeleteToken
	}()
	for _, c := range []struct{ path, token string }{
		{"/aggregates/acct/a", ""},
		{"/aggregates/acct/a", "garbage"},
		{"/aggregates/acct/a", tokA + "x"},
		{"/aggregates/acct/b", tokA},     // bound to another aggregate
		{"/aggregates/acct/a", tokType},  // a type's token for one aggregate
		{"/aggregates/acct", tokA},       // an aggregate's token for the type
		{"/aggregates/acct/a", otherTok}, // another handler's
		{"/aggregates/user", tokType},    // another type
		{"/aggregates/acct/a", strings.Repeat("A", 300)},
	} {
		mustErr(t, e.do("DELETE", c.path+"?deleteToken="+c.token, ""), 403, "forbidden")
	}
	if len(e.feed("/feeds/acct").Entries) != 2 {
		t.Fatal("a refused delete deleted something")
	}
	// Expired.
	now = now.Add(11 * time.Minute)
	mustErr(t, e.do("DELETE", "/aggregates/acct/a?deleteToken="+tokA, ""), 403, "forbidden")
	now = now.Add(-2 * time.Minute)
	res := e.must(204, "DELETE", "/aggregates/acct/a?deleteToken="+tokA, "")
	if b := readBody(t, res); b != "" {
		t.Errorf("204 with body %q", b)
	}
	e.must(404, "HEAD", "/aggregates/acct/a", "")
	if f := e.feed("/feeds/acct"); f.ids() != "acct/b:1" {
		t.Errorf("after delete: %s", f.ids())
	}
	mustErr(t, e.do("DELETE", "/aggregates/acct/a?deleteToken="+tokA, ""), 404, "not_found")
	e.must(204, "DELETE", "/aggregates/acct?deleteToken="+tokType, "")
	e.must(404, "HEAD", "/aggregates/acct/b", "")
	e.must(200, "HEAD", "/aggregates/user/u", "")
}

func TestEncryptedDataHTTP(t *testing.T) {
	e := newFeedEnv(t, nil)
	enc := "AES256:q83vEjRWeJA=\u00e9"
	body := `{"events":[{"eventId":"` + id1 + `","eventType":"Secret","data":{"a":1},"encryptedData":` + strconv.Quote(enc) + `}]}`
	e.must(200, "POST", "/aggregates/vault/v-1/events", body)
	if b := readBody(t, e.must(200, "GET", "/aggregates/vault/v-1", "")); !strings.Contains(b, `"encryptedData":"AES256:q83vEjRWeJA=é"`) {
		t.Errorf("load: %s", b)
	}
	if f := e.feed("/feeds/vault"); f.Entries[0].Events[0].EncryptedData != enc {
		t.Errorf("feed: %+v", f.Entries[0].Events[0])
	}
	long := `{"events":[{"eventId":"` + id2 + `","eventType":"Secret","encryptedData":"` + strings.Repeat("x", 65536) + `"}]}`
	b := mustErr(t, e.do("POST", "/aggregates/vault/v-1/events", long), 422, "invalid")
	if !hasField(b.Errors, "events[0].encryptedData") {
		t.Errorf("%+v", b.Errors)
	}
	b = mustErr(t, e.do("POST", "/aggregates/vault/v-1/events", `{"events":[{"eventId":"`+id2+`","eventType":"S","encryptedData":5}]}`), 422, "invalid")
	if !hasField(b.Errors, "events[0].encryptedData") {
		t.Errorf("%+v", b.Errors)
	}
}

// TestFeedSincePastHead: currentSequenceNumber is the feed's head whatever
// since is, and a since past the head is 409 cursor_ahead at once, also
// with a long waitTime, with the head in a header (before, the answer
// echoed since as currentSequenceNumber after waiting the whole waitTime).
func TestFeedSincePastHead(t *testing.T) {
	e := newFeedEnv(t, nil)
	saveN(e, "order", "o-1", 2)
	saveN(e, "user", "u-1", 1)
	saveN(e, "order", "o-2", 1)
	for _, c := range []struct {
		feed string
		head int64
	}{{"order", 2}, {"_all", 4}} {
		for since := int64(0); since <= c.head; since++ {
			if f := e.feed(fmt.Sprintf("/feeds/%s?since=%d", c.feed, since)); f.CurrentSequenceNumber != c.head {
				t.Errorf("%s since=%d: currentSequenceNumber %d, want the head %d", c.feed, since, f.CurrentSequenceNumber, c.head)
			}
		}
		for _, since := range []int64{c.head + 1, 41} {
			start := time.Now()
			res := e.do("GET", fmt.Sprintf("/feeds/%s?since=%d&waitTime=60000", c.feed, since), "")
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("%s since=%d waited %v", c.feed, since, took)
			}
			if h := res.Header.Get(httpapi.HeaderSequenceNumber); h != strconv.FormatInt(c.head, 10) {
				t.Errorf("%s since=%d: %s %q, want the head %d", c.feed, since, httpapi.HeaderSequenceNumber, h, c.head)
			}
			b := mustErr(t, res, 409, "cursor_ahead")
			if !hasField(b.Errors, "since") || !strings.Contains(b.Message, fmt.Sprintf("since %d is past the head of feed %q, %d", since, c.feed, c.head)) {
				t.Errorf("%s since=%d: %+v", c.feed, since, b)
			}
		}
	}
}
