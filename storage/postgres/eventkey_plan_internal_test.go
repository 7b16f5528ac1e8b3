package postgres

import (
	"testing"
	"time"
)

// TestStoredIDLookupsUseEventKey checks that every append statement that
// looks up its event ids among the stored ones (a retry, a reuse of an id)
// finds them through events_event_key (schema version 15), reading a few
// rows of events_rows, not the 20,000 events of the aggregate, planned
// for its arguments and as a generic plan: the statements' key expression
// (eventKey) is the index's.
func TestStoredIDLookupsUseEventKey(t *testing.T) {
	s := openBatchTest(t)
	insertLongAggregate(t, s)
	at := time.Now().UTC()
	stale := int64(1) // the aggregate is at version 20,000: every request is refused
	ids := []string{"e10", "e15000", "new"}
	types := []string{"Deposited", "Deposited", "Deposited"}
	data := [][]byte{[]byte(`{"cents":100}`), []byte(`{"cents":100}`), []byte(`{}`)}
	times := []time.Time{at, at, at}
	cases := []planCase{
		{"appendSingle", s.sql.appendSingle, 100, "", []any{"account", "long", &stale, "e10", "Deposited", []byte(`{"cents":100}`), at,
			nil, false, false, int64(0), nil}},
		{"appendOne", s.sql.appendOne, 100, "", []any{"account", "long", &stale, ids, types, data, times, nil, false, false, int64(0), nil}},
		{"append", s.sql.append, 100, "", []any{"account", "long", ids, &stale, types, data, times, nil, int64(0), nil}},
		{"appendGroup", s.sql.appendGroup, 100, "", []any{[]string{"account", "account"}, []string{"long", "other-1"},
			[]*int64{&stale, &stale}, []int64{3, 1}, []int64{1, 1, 1, 2}, append(ids, "x"), append(types, "Deposited"),
			append(data, []byte(`{}`)), append(times, at), nil, []int64{1, 2, 3, 1}, int64(0), false,
			[]bool{false, false}, nil}},
	}
	checkPlanReads(t, s, cases)
}
