package httpapi_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// newClockEnv is a handler on a fresh in-memory store whose clock the
// test sets through the returned pointer.
func newClockEnv(t *testing.T) (*env, *time.Time) {
	t.Helper()
	now := new(time.Time)
	st, err := eventstore.New(memory.New(), &eventstore.Options{Now: func() time.Time { return *now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, nil)
	opts := &httpapi.Options{Keys: []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}}
	return &env{t: t, st: st, p: p, h: httpapi.New(st, p, opts)}, now
}

func TestFeedFromTo(t *testing.T) {
	e, now := newClockEnv(t)
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	// Saved in this order, recorded at these times (not rising).
	plan := []struct {
		typ, id string
		at      time.Time
	}{
		{"order", "before", day.Add(-time.Microsecond)},
		{"order", "start", day},
		{"user", "u-1", day.Add(10 * time.Hour)},
		{"order", "ten", day.Add(10 * time.Hour)},
		{"order", "nine", day.Add(9 * time.Hour)},
		{"order", "end", day.Add(24*time.Hour - time.Microsecond)},
		{"order", "after", day.Add(24 * time.Hour)},
	}
	for _, p := range plan {
		*now = p.at
		saveN(e, p.typ, p.id, 2)
	}
	for _, c := range []struct{ path, want string }{
		// A date as from is the start of its day, as to its end (UTC).
		{"/feeds/order?from=2026-11-01&to=2026-11-01", "order/start:2 order/ten:2 order/nine:2 order/end:2"},
		{"/feeds/order?from=2026-11-01T09:00:00Z&to=2026-11-01T10:00:00Z", "order/ten:2 order/nine:2"},
		{"/feeds/order?from=2026-11-01T10:00:00%2B01:00&to=2026-11-01T09:00:00.000001Z", "order/nine:2"},
		{"/feeds/order?from=2026-11-01T09:00:00.000001Z&to=2026-11-01T10:00:00Z", "order/ten:2"},
		{"/feeds/order?from=2026-11-02", "order/after:2"},
		{"/feeds/order?to=2026-10-31", "order/before:2"},
		{"/feeds/order?to=2026-10-31T23:59:59.999998Z", ""},
		{"/feeds/order?from=2026-11-03&to=2026-11-04", ""},
		{"/feeds/_all?from=2026-11-01T10:00:00Z&to=2026-11-01T10:00:00Z", "user/u-1:2 order/ten:2"},
		{"/feeds/_all?from=2026-11-01T10:00:00Z&to=2026-11-01T10:00:00Z&filterType=user", "user/u-1:2"},
		{"/feeds/_all?from=0001-01-01&to=9999-12-31", "order/before:2 order/start:2 user/u-1:2 order/ten:2 order/nine:2 order/end:2 order/after:2"},
		// With since: after the entry "start" (sequence number 2 of order).
		{"/feeds/order?from=2026-11-01&to=2026-11-01&since=2", "order/ten:2 order/nine:2 order/end:2"},
	} {
		f := e.feed(c.path)
		if got := f.ids(); got != c.want {
			t.Errorf("%s: got %q, want %q", c.path, got, c.want)
		}
		if f.HasMore {
			t.Errorf("%s: hasMore with every entry returned", c.path)
		}
		head := int64(6)
		if strings.HasPrefix(c.path, "/feeds/_all") {
			head = e.feed("/feeds/_all?limit=1").CurrentSequenceNumber
		}
		if f.CurrentSequenceNumber != head {
			t.Errorf("%s: currentSequenceNumber %d, want the head of the whole feed %d", c.path, f.CurrentSequenceNumber, head)
		}
	}
	// Paging through the range with limit 1 and since = the last sequence
	// number reads every entry once; hasMore is set while some are left.
	var got []string
	since := "0"
	for range 10 {
		f := e.feed("/feeds/order?from=2026-11-01&to=2026-11-01&limit=1&since=" + since)
		if f.ids() != "" {
			got = append(got, f.ids())
		}
		if len(f.Entries) > 0 {
			since = strconv.FormatInt(f.Entries[len(f.Entries)-1].SequenceNumber, 10)
		}
		if !f.HasMore {
			break
		}
	}
	if s := strings.Join(got, " "); s != "order/start:2 order/ten:2 order/nine:2 order/end:2" {
		t.Errorf("paging the range with limit 1: %q", s)
	}
	// Partitions split the range's entries.
	n := 0
	for p := range 2 {
		n += len(e.feed("/feeds/order?from=2026-11-01&to=2026-11-01&partitionCount=2&partitionNumber=" + strconv.Itoa(p)).Entries)
	}
	if n != 4 {
		t.Errorf("partitions of the range hold %d entries, want 4", n)
	}
}

func TestFeedFromToBadParams(t *testing.T) {
	e := newFeedEnv(t, nil)
	saveN(e, "order", "o-1", 1)
	for _, c := range []struct{ query, param string }{
		{"from=x", "from"},
		{"from=2026-13-01", "from"},
		{"from=2026-11-31", "from"},
		{"from=2026-11-1", "from"},
		{"from=2026-11-01T10:00:00", "from"},
		{"from=2026-11-01T10:00:00+01:00", "from"}, // + is a space
		{"from=2026-11-01%2010:00:00Z", "from"},
		{"from=1700000000000", "from"},
		{"to=2026-11-01T25:00:00Z", "to"},
		{"from=0000-01-01", "from"},
		{"to=0000-12-31T23:59:59Z", "to"},
		{"from=10000-01-01", "from"},
		{"from=2026-11-01&from=2026-11-02", "from"},
		{"to=", "to"},
		{"from=2026-11-02&to=2026-11-01", "from"},
		{"from=2026-11-01T10:00:00.000001Z&to=2026-11-01T10:00:00Z", "from"},
		{"from=" + strings.Repeat("9", 5000), "from"},
	} {
		for _, feed := range []string{"_all", "order"} {
			b := mustErr(t, e.do("GET", "/feeds/"+feed+"?"+c.query, ""), 400, "malformed")
			if !hasField(b.Errors, c.param) || !strings.Contains(b.Message, c.param) {
				t.Errorf("%s: %+v does not name %s", c.query, b, c.param)
			}
		}
	}
	// One instant, and a whole day given as from and to, are fine.
	e.feed("/feeds/order?from=2026-11-01T10:00:00Z&to=2026-11-01T10:00:00Z")
	e.feed("/feeds/order?from=2026-11-01&to=2026-11-01")
}
