package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The isolation matrix over HTTP: two projects, each with its default data
// space and two tenants, write the same aggregate ids, event ids and event
// types, and each project has a reaction definition; every read, query,
// list (reactions too), count, overview and deletion of each space is
// checked to see that space's data only, and every combination of
// keys and tenant header either answers 4xx or the caller's own data.

// Tenant ids of the matrix: isoT2 is a tenant of both projects.
const (
	isoT1 = "a1a1a1a1-0000-4000-8000-000000000001" // project a only
	isoT2 = "b2b2b2b2-0000-4000-8000-000000000002" // projects a and b
	isoT3 = "c3c3c3c3-0000-4000-8000-000000000003" // project b only
	isoT9 = "d9d9d9d9-0000-4000-8000-000000000009" // no project's
)

// isoKeys is a key pair of the matrix; "" for none.
type isoKeys struct{ name, access, secret string }

var (
	isoKeysA     = isoKeys{"a's keys", "ak_a", "sk_a"}
	isoKeysB     = isoKeys{"b's keys", "ak_b", "sk_b"}
	isoKeysMixed = isoKeys{"a's access key with b's secret", "ak_a", "sk_b"}
	isoKeysNone  = isoKeys{"no keys", "", ""}
)

// isoSpace is one data space: a project's default space (tenant "") or
// one of its tenants. Space k saves k events to order/o-1, one save each,
// and one event to its own aggregate order/p-k (a bulk save); every event's data is
// {"space":"NAME"}.
type isoSpace struct {
	k      int
	keys   isoKeys
	tenant string
	name   string
}

var isoSpaces = []isoSpace{
	{1, isoKeysA, "", "a"},
	{2, isoKeysA, isoT1, "a+T1"},
	{3, isoKeysA, isoT2, "a+T2"},
	{4, isoKeysB, "", "b"},
	{5, isoKeysB, isoT2, "b+T2"},
	{6, isoKeysB, isoT3, "b+T3"},
}

// isoHeader is the tenant header of a request: none when name is "".
type isoHeader []string // name, value, name, value...

func (sp isoSpace) header() isoHeader {
	if sp.tenant == "" {
		return nil
	}
	return isoHeader{"Serialized-Tenant-Id", sp.tenant}
}

func (sp isoSpace) marker() string { return `"space":"` + sp.name + `"` }

func (sp isoSpace) private() string { return "p-" + strconv.Itoa(sp.k) }

// isoCall sends a request with keys and header and returns the status and
// body.
func isoCall(t *testing.T, base string, keys isoKeys, h isoHeader, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if keys.access != "" {
		req.Header.Set("Serialized-Access-Key", keys.access)
		req.Header.Set("Serialized-Secret-Access-Key", keys.secret)
	}
	for i := 0; i+1 < len(h); i += 2 {
		req.Header[h[i]] = append(req.Header[h[i]], h[i+1])
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// isoEventID is the id of the n-th event a space saves: the same in every
// space.
func isoEventID(n int) string { return fmt.Sprintf("e0e0e0e0-0000-4000-8000-%012d", n) }

func isoEvent(sp isoSpace, n int) string {
	return `{"eventId":"` + isoEventID(n) + `","eventType":"Placed","data":{` + sp.marker() + `}}`
}

// isoReaction is each project's reaction definition: a reaction a day
// after every Placed, so that each space has one per event it saved and
// none is delivered.
const isoReaction = `{"reactionName":"r","feedName":"order","reactOnEventType":"Placed","offset":"P1D",` +
	`"action":{"actionType":"HTTP_POST","targetUri":"https://hooks.example.com/iso"}}`

// foreignReaction returns the name of another space one of whose
// reactions body lists (by its private aggregate), or "".
func foreignReaction(sp isoSpace, body string) string {
	for _, o := range isoSpaces {
		if o.name != sp.name && strings.Contains(body, `"aggregateId":"`+o.private()+`"`) {
			return o.name
		}
	}
	return ""
}

const (
	isoDefN = `{"projectionName":"n","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`
	isoDefS = `{"projectionName":"s","feedName":"order","handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`
)

// isoDefOnly is a definition of project p only.
func isoDefOnly(p string) string {
	return `{"projectionName":"only-` + p + `","feedName":"order","handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`
}

// isoMatrix is the state of one run of the matrix.
type isoMatrix struct {
	t       *testing.T
	base    string
	deleted map[string]bool // spaces whose tenant is deleted
}

// do sends a request in space sp.
func (m *isoMatrix) do(sp isoSpace, method, path, body string) (int, string) {
	m.t.Helper()
	return isoCall(m.t, m.base, sp.keys, sp.header(), method, path, body)
}

// foreign returns the marker of another space that body holds, or "".
func foreign(sp isoSpace, body string) string {
	for _, o := range isoSpaces {
		if o.name != sp.name && strings.Contains(body, o.marker()) {
			return o.name
		}
	}
	return ""
}

// expect checks a request in space sp: its status, that body holds every
// string of has, and no other space's marker.
func (m *isoMatrix) expect(sp isoSpace, method, path, body string, code int, has ...string) string {
	m.t.Helper()
	got, resp := m.do(sp, method, path, body)
	if got != code {
		m.t.Errorf("space %s: %s %s: %d %s; want %d", sp.name, method, path, got, clipBody(resp), code)
		return resp
	}
	if f := foreign(sp, resp); f != "" {
		m.t.Errorf("space %s: %s %s answers data of space %s: %s", sp.name, method, path, f, clipBody(resp))
	}
	for _, h := range has {
		if !strings.Contains(resp, h) {
			m.t.Errorf("space %s: %s %s: %s; want it to hold %s", sp.name, method, path, clipBody(resp), h)
		}
	}
	return resp
}

func clipBody(s string) string {
	if len(s) > 600 {
		return s[:600] + "..."
	}
	return s
}

// isoFeed is the part of a feed answer the matrix reads.
type isoFeed struct {
	Entries []struct {
		SequenceNumber int64 `json:"sequenceNumber"`
		AggregateID    string
		Events         []struct {
			Data struct{ Space string }
		}
	}
}

// feed reads path in space sp and checks that every event is the space's
// own; it returns the entries' sequence numbers.
func (m *isoMatrix) feed(sp isoSpace, path string) []int64 {
	m.t.Helper()
	resp := m.expect(sp, "GET", path, "", 200)
	var f isoFeed
	if err := json.Unmarshal([]byte(resp), &f); err != nil {
		m.t.Errorf("space %s: GET %s: %v", sp.name, path, err)
		return nil
	}
	var seqs []int64
	for _, e := range f.Entries {
		seqs = append(seqs, e.SequenceNumber)
		for _, ev := range e.Events {
			if ev.Data.Space != sp.name {
				m.t.Errorf("space %s: GET %s holds an event of space %q", sp.name, path, ev.Data.Space)
			}
		}
	}
	return seqs
}

// write creates the definitions and tenants and saves every space's
// events.
func (m *isoMatrix) write() {
	t := m.t
	for _, p := range []struct {
		keys    isoKeys
		name    string
		tenants []string
	}{{isoKeysA, "a", []string{isoT1, isoT2}}, {isoKeysB, "b", []string{isoT2, isoT3}}} {
		for _, def := range []string{isoDefN, isoDefS, isoDefOnly(p.name)} {
			if code, body := isoCall(t, m.base, p.keys, nil, "POST", "/projections/definitions", def); code != 200 {
				t.Fatalf("project %s: definition: %d %s", p.name, code, body)
			}
		}
		if code, body := isoCall(t, m.base, p.keys, nil, "POST", "/reactions/definitions", isoReaction); code != 200 {
			t.Fatalf("project %s: reaction definition: %d %s", p.name, code, body)
		}
		for _, id := range p.tenants {
			if code, body := isoCall(t, m.base, p.keys, nil, "POST", "/tenants", `{"tenantId":"`+id+`","reference":"`+p.name+`"}`); code != 200 {
				t.Fatalf("project %s: add tenant %s: %d %s", p.name, id, code, body)
			}
		}
	}
	for _, sp := range isoSpaces {
		for n := 1; n <= sp.k; n++ {
			body := fmt.Sprintf(`{"expectedVersion":%d,"events":[%s]}`, n-1, isoEvent(sp, n))
			m.expect(sp, "POST", "/aggregates/order/o-1/events", body, 200)
		}
		// The bulk form, which the swaps send too.
		m.expect(sp, "POST", "/aggregates/order/events", `{"batches":[{"aggregateId":"`+sp.private()+`","events":[`+isoEvent(sp, 100)+`]}]}`, 200)
	}
	// The projections have caught up in every space.
	for _, sp := range isoSpaces {
		want := fmt.Sprintf(`"count":"%d"`, sp.k+1)
		waitFor(t, "space "+sp.name+"'s projections", func() string {
			if code, body := m.do(sp, "GET", "/projections/aggregated/n", ""); code != 200 || !strings.Contains(body, want) {
				return fmt.Sprintf("aggregated n: %d %s, want %s", code, body, want)
			}
			if code, body := m.do(sp, "GET", "/projections/single/s/"+sp.private(), ""); code != 200 {
				return fmt.Sprintf("single s/%s: %d %s", sp.private(), code, body)
			}
			if code, body := m.do(sp, "GET", "/reactions?status=SCHEDULED", ""); code != 200 || !strings.Contains(body, fmt.Sprintf(`"totalCount":%d`, sp.k+1)) {
				return fmt.Sprintf("reactions: %d %s, want %d", code, clipBody(body), sp.k+1)
			}
			return ""
		})
	}
}

// verify checks every read of every space.
func (m *isoMatrix) verify(stage string) {
	m.t.Run(stage, func(t *testing.T) {
		mm := *m
		mm.t = t
		for _, sp := range isoSpaces {
			if m.deleted[sp.name] {
				mm.verifyDeleted(sp)
			} else {
				mm.verifySpace(sp)
			}
		}
	})
}

// verifySpace checks that every read of space sp answers its own data.
func (m *isoMatrix) verifySpace(sp isoSpace) {
	k, own := sp.k, sp.marker()
	project := sp.name[:1]
	other := map[string]string{"a": "b", "b": "a"}[project]

	// Aggregates: load, HEAD, the others' private aggregates, list.
	m.expect(sp, "GET", "/aggregates/order/o-1", "", 200, fmt.Sprintf(`"aggregateVersion":%d,`, k), own)
	m.expect(sp, "HEAD", "/aggregates/order/o-1", "", 200)
	m.expect(sp, "GET", fmt.Sprintf("/aggregates/order/o-1?since=%d", k-1), "", 200, own)
	for _, o := range isoSpaces {
		code := 404
		if o.k == k {
			code = 200
		}
		m.expect(sp, "GET", "/aggregates/order/"+o.private(), "", code)
		m.expect(sp, "HEAD", "/aggregates/order/"+o.private(), "", code)
		m.expect(sp, "GET", "/projections/single/s/"+o.private(), "", code)
	}
	list := m.expect(sp, "GET", "/aggregates/order", "", 200, `"aggregateId":"o-1"`, `"aggregateId":"`+sp.private()+`"`)
	if n := strings.Count(list, `"aggregateId"`); n != 2 {
		m.t.Errorf("space %s: GET /aggregates/order lists %d aggregates, want 2: %s", sp.name, n, list)
	}

	// Feeds: the list, one feed, _all, since, partitions.
	m.expect(sp, "GET", "/feeds", "", 200, fmt.Sprintf(`{"aggregateType":"order","aggregateCount":2,"batchCount":%d,"eventCount":%d}`, k+1, k+1))
	for _, feed := range []string{"/feeds/order", "/feeds/_all"} {
		seqs := m.feed(sp, feed)
		if len(seqs) != k+1 {
			m.t.Errorf("space %s: GET %s: %d entries, want %d", sp.name, feed, len(seqs), k+1)
			continue
		}
		if after := m.feed(sp, fmt.Sprintf("%s?since=%d", feed, seqs[0])); len(after) != k {
			m.t.Errorf("space %s: GET %s?since=%d: %d entries, want %d", sp.name, feed, seqs[0], len(after), k)
		}
		total := 0
		for n := 0; n < 2; n++ {
			total += len(m.feed(sp, fmt.Sprintf("%s?partitionCount=2&partitionNumber=%d", feed, n)))
		}
		if total != k+1 {
			m.t.Errorf("space %s: GET %s in 2 partitions: %d entries, want %d", sp.name, feed, total, k+1)
		}
	}
	m.expect(sp, "HEAD", "/feeds/order", "", 200)

	// Projections: single, aggregated, list, count, overview.
	m.expect(sp, "GET", "/projections/single/s/o-1", "", 200, fmt.Sprintf(`"count":"%d"`, k))
	m.expect(sp, "GET", "/projections/single/s/"+sp.private(), "", 200, `"count":"1"`)
	m.expect(sp, "GET", "/projections/single/only-"+project+"/o-1", "", 200, fmt.Sprintf(`"count":"%d"`, k))
	m.expect(sp, "GET", "/projections/single/only-"+other+"/o-1", "", 404)
	m.expect(sp, "GET", "/projections/aggregated/n", "", 200, fmt.Sprintf(`"count":"%d"`, k+1))
	slist := m.expect(sp, "GET", "/projections/single/s", "", 200, `"projectionId":"o-1"`, `"projectionId":"`+sp.private()+`"`, `"totalCount":2`)
	if n := strings.Count(slist, `"projectionId"`); n != 2 {
		m.t.Errorf("space %s: GET /projections/single/s lists %d instances, want 2: %s", sp.name, n, slist)
	}
	m.expect(sp, "GET", "/projections/single/s/_count", "", 200, `"count":2`)
	// Reactions: the space's own, one per event it saved.
	rl := m.expect(sp, "GET", "/reactions?status=ALL", "", 200, fmt.Sprintf(`"totalCount":%d`, k+1), `"aggregateId":"`+sp.private()+`"`)
	if f := foreignReaction(sp, rl); f != "" {
		m.t.Errorf("space %s: GET /reactions lists a reaction of space %s: %s", sp.name, f, clipBody(rl))
	}
	ov := m.expect(sp, "GET", "/projections", "", 200, `"projectionName":"only-`+project+`"`,
		`"projectionName":"s","feedName":"order","aggregated":false,"projectionsCount":2,`)
	if strings.Contains(ov, "only-"+other) {
		m.t.Errorf("space %s: GET /projections names project %s's definition: %s", sp.name, other, ov)
	}
	if sp.tenant == "" {
		defs := m.expect(sp, "GET", "/projections/definitions", "", 200, `"only-`+project+`"`)
		if strings.Contains(defs, "only-"+other) {
			m.t.Errorf("space %s: definitions of project %s: %s", sp.name, other, defs)
		}
		tenants := m.expect(sp, "GET", "/tenants", "", 200, isoT2)
		for id, p := range map[string]string{isoT1: "a", isoT3: "b"} {
			if strings.Contains(tenants, id) != (p == project) {
				m.t.Errorf("space %s: GET /tenants: %s", sp.name, tenants)
			}
		}
	} else {
		m.expect(sp, "GET", "/projections/definitions", "", 400)
		m.expect(sp, "GET", "/tenants", "", 400)
	}
}

// verifyDeleted checks that the deleted tenant sp answers no data.
func (m *isoMatrix) verifyDeleted(sp isoSpace) {
	for _, path := range []string{"/aggregates/order/o-1", "/aggregates/order/" + sp.private(), "/aggregates/order",
		"/feeds", "/feeds/order", "/feeds/_all", "/feeds/_all?since=1", "/feeds/_all?partitionCount=2&partitionNumber=0",
		"/projections/single/s/o-1", "/projections/aggregated/n", "/projections/single/s", "/projections/single/s/_count", "/projections",
		"/reactions"} {
		m.expect(sp, "GET", path, "", 400, "unknown_tenant")
	}
	m.expect(sp, "HEAD", "/aggregates/order/o-1", "", 400)
	m.expect(sp, "POST", "/aggregates/order/o-1/events", `{"events":[`+isoEvent(sp, 200)+`]}`, 400, "unknown_tenant")
	m.expect(sp, "DELETE", "/aggregates/order/o-1", "", 400, "unknown_tenant")
}

// swaps sends every combination of keys and tenant header and checks it
// answers 4xx or the data of the space it names.
func (m *isoMatrix) swaps() {
	t := m.t
	headers := []struct {
		name string
		h    isoHeader
	}{
		{"no header", nil},
		{"T1 (a's)", isoHeader{"Serialized-Tenant-Id", isoT1}},
		{"T2 (a's and b's)", isoHeader{"Serialized-Tenant-Id", isoT2}},
		{"T2 as Service-Tenant-Id", isoHeader{"Service-Tenant-Id", isoT2}},
		{"T3 (b's)", isoHeader{"Serialized-Tenant-Id", isoT3}},
		{"T3 in upper case", isoHeader{"Serialized-Tenant-Id", strings.ToUpper(isoT3)}},
		{"T9 (no project's)", isoHeader{"Serialized-Tenant-Id", isoT9}},
		{"malformed", isoHeader{"Serialized-Tenant-Id", "not-a-uuid"}},
		{"empty", isoHeader{"Serialized-Tenant-Id", ""}},
		{"T1 and T2 in both spellings", isoHeader{"Serialized-Tenant-Id", isoT1, "Service-Tenant-Id", isoT2}},
		{"T1 twice", isoHeader{"Serialized-Tenant-Id", isoT1, "Serialized-Tenant-Id", isoT1}},
	}
	for _, keys := range []isoKeys{isoKeysA, isoKeysB, isoKeysMixed, isoKeysNone} {
		for _, h := range headers {
			combo := keys.name + " × " + h.name
			// The space the combination names, if any.
			var sp *isoSpace
			if keys == isoKeysA || keys == isoKeysB {
				for i := range isoSpaces {
					s := &isoSpaces[i]
					if s.keys != keys {
						continue
					}
					// No header: the default space; one header with a
					// tenant id of the project, in either case: that
					// tenant.
					if (len(h.h) == 0 && s.tenant == "") || (len(h.h) == 2 && s.tenant != "" && s.tenant == strings.ToLower(h.h[1])) {
						sp = s
					}
				}
			}
			reads := []string{"/aggregates/order/o-1", "/aggregates/order", "/feeds/_all", "/feeds/order?partitionCount=2&partitionNumber=1",
				"/projections/aggregated/n", "/projections/single/s/o-1", "/projections/single/s/_count", "/projections", "/reactions?status=ALL"}
			for _, path := range reads {
				code, body := isoCall(t, m.base, keys, h.h, "GET", path, "")
				switch {
				case sp == nil && (code < 400 || code >= 500):
					t.Errorf("%s: GET %s: %d %s; want 4xx", combo, path, code, clipBody(body))
				case sp != nil && code != 200:
					t.Errorf("%s: GET %s: %d %s; want 200 with space %s's data", combo, path, code, clipBody(body), sp.name)
				case sp != nil:
					if f := foreign(*sp, body); f != "" {
						t.Errorf("%s: GET %s answers space %s's data, want %s's only: %s", combo, path, f, sp.name, clipBody(body))
					}
					if f := foreignReaction(*sp, body); f != "" {
						t.Errorf("%s: GET %s lists a reaction of space %s, want %s's only: %s", combo, path, f, sp.name, clipBody(body))
					}
				}
				if sp != nil && path == "/aggregates/order/o-1" && !strings.Contains(body, fmt.Sprintf(`"aggregateVersion":%d,`, sp.k)) {
					t.Errorf("%s: GET %s: %s; want space %s's o-1", combo, path, clipBody(body), sp.name)
				}
			}
			if sp != nil {
				continue
			}
			// Nothing is stored, and nothing deleted, by a refused call.
			for _, w := range []struct{ method, path, body string }{
				{"POST", "/aggregates/order/o-1/events", `{"events":[{"eventId":"f0f0f0f0-0000-4000-8000-000000000001","eventType":"Placed","data":{"space":"swap"}}]}`},
				{"POST", "/aggregates/order/events", `{"batches":[{"aggregateId":"swap","events":[{"eventId":"f0f0f0f0-0000-4000-8000-000000000002","eventType":"Placed","data":{"space":"swap"}}]}]}`},
				{"DELETE", "/aggregates/order/o-1", ""},
				{"DELETE", "/aggregates/order", ""},
				{"DELETE", "/projections/single/s", ""},
			} {
				if code, body := isoCall(t, m.base, keys, h.h, w.method, w.path, w.body); code < 400 || code >= 500 {
					t.Errorf("%s: %s %s: %d %s; want 4xx", combo, w.method, w.path, code, clipBody(body))
				}
			}
		}
	}
}

// deletions checks the two-step deletion: a space sees only its own
// aggregates to delete, a token of one space deletes nothing in another,
// and deleting in one space leaves the others' data.
func (m *isoMatrix) deletions() {
	t := m.t
	var live []isoSpace
	for _, sp := range isoSpaces {
		if !m.deleted[sp.name] {
			live = append(live, sp)
		}
	}
	token := func(sp isoSpace, path string) string {
		t.Helper()
		body := m.expect(sp, "DELETE", path, "", 200, "deleteToken")
		var tok struct{ DeleteToken string }
		_ = json.Unmarshal([]byte(body), &tok)
		return tok.DeleteToken
	}
	for _, sp := range live {
		// Another space's aggregate is not found; a token of sp for o-1
		// or the type deletes nothing elsewhere.
		for _, o := range live {
			if o.k != sp.k {
				m.expect(sp, "DELETE", "/aggregates/order/"+o.private(), "", 404)
			}
		}
		for _, path := range []string{"/aggregates/order/o-1", "/aggregates/order"} {
			tok := token(sp, path)
			for _, o := range live {
				if o.k != sp.k {
					if code, body := m.do(o, "DELETE", path+"?deleteToken="+tok, ""); code != 403 {
						t.Errorf("space %s's delete token for %s used in space %s: %d %s; want 403", sp.name, path, o.name, code, body)
					}
				}
			}
		}
	}
	// Each space deletes its private aggregate in turn; the others keep
	// theirs.
	for i, sp := range live {
		tok := token(sp, "/aggregates/order/"+sp.private())
		m.expect(sp, "DELETE", "/aggregates/order/"+sp.private()+"?deleteToken="+tok, "", 204)
		for j, o := range live {
			want := 200
			if j <= i {
				want = 404
			}
			if code, _ := m.do(o, "HEAD", "/aggregates/order/"+o.private(), ""); code != want {
				t.Errorf("after space %s deleted %s: HEAD %s in space %s: %d, want %d", sp.name, sp.private(), o.private(), o.name, code, want)
			}
			m.expect(o, "GET", "/aggregates/order/o-1", "", 200, fmt.Sprintf(`"aggregateVersion":%d,`, o.k))
		}
	}
}

// runIsolation runs the matrix against the server at base, with the keys
// of twoProjects.
func runIsolation(t *testing.T, base string) {
	m := &isoMatrix{t: t, base: base, deleted: map[string]bool{}}
	m.write()
	m.verify("after writing")
	if t.Failed() {
		return
	}
	t.Run("swapped keys and headers", func(t *testing.T) {
		mm := *m
		mm.t = t
		mm.swaps()
	})
	m.verify("after the swaps")

	// Deleting tenant T2 of project a leaves T2 of project b, and every
	// other space, as it was.
	if code, body := isoCall(t, base, isoKeysA, nil, "DELETE", "/tenants/"+isoT2, ""); code != 200 {
		t.Fatalf("delete a's tenant T2: %d %s", code, body)
	}
	m.deleted["a+T2"] = true
	m.verify("after deleting a's tenant T2")
	t.Run("deletions", func(t *testing.T) {
		mm := *m
		mm.t = t
		mm.deletions()
	})
}

func TestIsolationMatrixMemory(t *testing.T) {
	keys := writeKeys(t, "", twoProjects)
	base, _, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", "memory", "-keys", keys, "-log-requests=false"}, nil)
	runIsolation(t, base)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestIsolationMatrixSQLite(t *testing.T) {
	dir := t.TempDir()
	keys := writeKeys(t, "", twoProjects)
	base, _, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", "sqlite:" + filepath.Join(dir, "events.db"), "-keys", keys, "-log-requests=false"}, nil)
	runIsolation(t, base)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "events.a+t-"+isoT2+".db")); err == nil {
		t.Error("a's deleted tenant T2 still has its file")
	}
	if _, err := os.Stat(filepath.Join(dir, "events.b+t-"+isoT2+".db")); err != nil {
		t.Errorf("b's tenant T2: %v", err)
	}
}

func TestIsolationMatrixPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL")
	}
	ctx := context.Background()
	admin, url, schema := postgresAdmin(t, "es_iso_")
	var schemas []string
	for _, p := range []string{schema + "_a", schema + "_b"} {
		ts := tenantStorage{schema: p}
		schemas = append(schemas, p, ts.registrySchema())
		for _, id := range []string{isoT1, isoT2, isoT3, isoT9} {
			schemas = append(schemas, ts.tenantSchema(id))
		}
	}
	t.Cleanup(func() {
		for _, s := range append(schemas, schema) {
			_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
		}
	})
	keys := writeKeys(t, "", twoProjects)
	base, _, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", url, "-postgres-schema", schema, "-keys", keys, "-log-requests=false"}, nil)
	runIsolation(t, base)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Tenants are rows of their project's tables (postgres.Options.Tenant),
	// not schemas: a's deleted T2 has none left, b's T2 has its events.
	events := func(project, tenant string) int {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{project}.Sanitize()+".events_rows WHERE tenant = $1",
			tenant).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := events(schema+"_a", isoT2); n != 0 {
		t.Errorf("a's deleted tenant T2 still has %d events", n)
	}
	if events(schema+"_b", isoT2) == 0 {
		t.Error("b's tenant T2 has no events")
	}
	var legacy int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ANY($1)",
		schemas).Scan(&legacy); err != nil {
		t.Fatal(err)
	}
	if legacy != 4 { // the two projects' schemas and registries
		t.Errorf("%d of the schemas of projects, registries and tenants exist, want 4: tenants keep no schema", legacy)
	}
}
