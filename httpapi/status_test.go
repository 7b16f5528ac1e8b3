package httpapi_test

import (
	"encoding/json"
	"testing"

	"github.com/eventkit-go/eventstore/httpapi"
)

// statusBody is the body of GET /status.
type statusBody struct {
	Version   string `json:"version"`
	Storage   string `json:"storage"`
	Ready     bool   `json:"ready"`
	Tenants   bool   `json:"tenants"`
	Reactions bool   `json:"reactions"`
	Console   bool   `json:"console"`
	Saves     struct {
		IntervalSeconds int     `json:"intervalSeconds"`
		Until           int64   `json:"until"`
		Batches         []int64 `json:"batches"`
		Events          []int64 `json:"events"`
	} `json:"saves"`
}

func sum(xs []int64) (n int64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// TestStatus: GET /status names the configured version and storage, and
// counts the stored batches and events (a single save, a bulk save), not
// a retried save of stored events, nor a refused one.
func TestStatus(t *testing.T) {
	e := newEnv(t, &httpapi.Options{Version: "v9.9.9", StorageName: "memory"})
	var s statusBody
	if err := json.Unmarshal([]byte(readBody(t, e.must(200, "GET", "/status", ""))), &s); err != nil {
		t.Fatal(err)
	}
	if s.Version != "v9.9.9" || s.Storage != "memory" || s.Ready || s.Tenants || s.Reactions || !s.Console {
		t.Errorf("status %+v", s)
	}
	if s.Saves.IntervalSeconds != 10 || len(s.Saves.Batches) != 60 || len(s.Saves.Events) != 60 || sum(s.Saves.Batches) != 0 {
		t.Errorf("saves %+v", s.Saves)
	}
	save := `{"events":[{"eventId":"6f3a8d4e-0000-4000-8000-000000000001","eventType":"Placed","data":{}},` +
		`{"eventId":"6f3a8d4e-0000-4000-8000-000000000002","eventType":"Paid","data":{}}]}`
	e.must(200, "POST", "/aggregates/order/o-1/events", save)
	e.must(200, "POST", "/aggregates/order/o-1/events", save) // a retry: stored already
	e.must(409, "POST", "/aggregates/order/o-2/events", `{"expectedVersion":3,"events":[{"eventId":"6f3a8d4e-0000-4000-8000-000000000003","eventType":"Placed","data":{}}]}`)
	e.must(200, "POST", "/aggregates/order/events", `{"batches":[`+
		`{"aggregateId":"o-3","events":[{"eventId":"6f3a8d4e-0000-4000-8000-000000000004","eventType":"Placed","data":{}}]},`+
		`{"aggregateId":"o-4","events":[{"eventId":"6f3a8d4e-0000-4000-8000-000000000005","eventType":"Placed","data":{}}]}]}`)
	s = statusBody{}
	if err := json.Unmarshal([]byte(readBody(t, e.must(200, "GET", "/status", ""))), &s); err != nil {
		t.Fatal(err)
	}
	if b, ev := sum(s.Saves.Batches), sum(s.Saves.Events); b != 3 || ev != 4 {
		t.Errorf("counted %d batches, %d events; want 3, 4", b, ev)
	}
	e.must(400, "GET", "/status?x=1", "")
	e.must(401, "GET", "/status", "", httpapi.HeaderAccessKey, "")
}

// TestStatusDefaults: without Options.Version the version comes from the
// build (a test binary has none: "(devel)"), and no storage is named.
func TestStatusDefaults(t *testing.T) {
	e := newEnv(t, &httpapi.Options{DisableConsole: true})
	var s statusBody
	if err := json.Unmarshal([]byte(readBody(t, e.must(200, "GET", "/status", ""))), &s); err != nil {
		t.Fatal(err)
	}
	if s.Version == "" || s.Storage != "" || s.Console {
		t.Errorf("status %+v", s)
	}
}
