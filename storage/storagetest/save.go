package storagetest

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func saveCases() []testCase {
	return []testCase{
		{"SaveCreatesAggregate", "the first save creates the aggregate; Load returns its events in order with every field as saved", testSaveCreates},
		{"RecordedAtRoundTrips", "RecordedAt is stored in UTC with microsecond precision and loads back equal", testRecordedAt},
		{"VersionsCountSaves", "every event of one save gets the same Version, the next save Version+1; Sequence numbers events 1..n", testVersions},
		{"PositionsIncrease", "positions are strictly increasing across the whole store; a save's Position is that of its last event", testPositions},
		{"AggregateIdentity", "an aggregate is identified by type and id: the same id under another type is another aggregate", testIdentity},
		{"LoadUnknown", "Load of an aggregate without events fails with ErrNotFound", testLoadUnknown},
		{"SlicesOwnedByCaller", "returned slices belong to the caller and slices passed in are not retained", testOwnership},
		{"ExpectVersion", "a save with an expected version succeeds only at that version; ExpectVersion(0) means the aggregate must not exist; a refused save stores nothing", testExpectVersion},
		{"ExpectVersionConcurrent", "of K concurrent saves with the same expected version exactly one wins, the others fail with ErrConflict", testExpectVersionConcurrent},
		{"ValidationRejectsBatch", "an invalid event rejects the whole batch with a *ValidationError naming its index and field, and nothing is stored", testValidation},
	}
}

func testSaveCreates(t *testing.T, h *harness) {
	upper := strings.ToUpper(newID())
	in := []eventstore.NewEvent{
		{ID: newID(), Type: "Created"},
		{ID: upper, Type: "Renamed", Data: []byte(`{"name":"Ada","tags":["a","b"],"n":1.50}`)},
		{ID: newID(), Type: "Noted", Data: []byte(`{}`)},
	}
	before := time.Now().Add(-time.Second)
	res := mustSave(t, h, "order", "o-1", in, nil)
	after := time.Now().Add(time.Second)
	if res.Duplicate {
		t.Errorf("the first save of new events must not be reported as Duplicate")
	}
	agg := mustLoad(t, h, "order", "o-1")
	if agg.Type != "order" || agg.ID != "o-1" {
		t.Errorf("Load must return the aggregate's type and id: got %s/%s, want order/o-1", agg.Type, agg.ID)
	}
	if agg.Version != 1 || res.Version != 1 {
		t.Errorf("the first save must produce version 1: Save returned %d, Load %d", res.Version, agg.Version)
	}
	if len(agg.Events) != len(in) {
		t.Fatalf("Load must return every saved event: got %d, want %d", len(agg.Events), len(in))
	}
	for i, e := range agg.Events {
		wantID := strings.ToLower(in[i].ID)
		if e.ID != wantID {
			t.Errorf("event %d: Load must return events in the order saved with ids in lower case: got id %q, want %q", i, e.ID, wantID)
		}
		if e.Type != in[i].Type {
			t.Errorf("event %d: Type must round-trip: got %q, want %q", i, e.Type, in[i].Type)
		}
		if in[i].Data == nil && e.Data != nil {
			t.Errorf("event %d: an event saved without data must load with nil Data, got %q", i, e.Data)
		}
		if in[i].Data != nil && !bytes.Equal(e.Data, in[i].Data) {
			t.Errorf("event %d: Data must round-trip byte for byte: got %q, want %q", i, e.Data, in[i].Data)
		}
		if e.AggregateType != "order" || e.AggregateID != "o-1" {
			t.Errorf("event %d: events must carry their aggregate: got %s/%s", i, e.AggregateType, e.AggregateID)
		}
		if e.Version != 1 || e.Sequence != int64(i)+1 {
			t.Errorf("event %d: got Version %d Sequence %d, want Version 1 Sequence %d", i, e.Version, e.Sequence, i+1)
		}
		if e.Position <= 0 {
			t.Errorf("event %d: positions must be positive, got %d", i, e.Position)
		}
		if e.RecordedAt.Before(before) || e.RecordedAt.After(after) {
			t.Errorf("event %d: RecordedAt must be the time of the save: got %v, saved between %v and %v", i, e.RecordedAt, before, after)
		}
	}
	if last := agg.Events[len(agg.Events)-1].Position; res.Position != last {
		t.Errorf("Save must return the Position of the batch's last event: got %d, want %d", res.Position, last)
	}
}

func testRecordedAt(t *testing.T, h *harness) {
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	now := time.Date(2024, 2, 29, 23, 59, 58, 123456789, zone)
	store, err := eventstore.New(h.s, &eventstore.Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	// Not closed: h.store owns the storage.
	mustSave(t, h, "clock", "c-1", evs("Ticked", 1), nil) // through h.store: a real clock
	if _, err := store.Save(t.Context(), "clock", "c-2", evs("Ticked", 2), nil); err != nil {
		t.Fatal(err)
	}
	agg, err := store.Load(t.Context(), "clock", "c-2")
	if err != nil {
		t.Fatal(err)
	}
	want := now.UTC().Truncate(time.Microsecond)
	for i, e := range agg.Events {
		if !e.RecordedAt.Equal(want) {
			t.Errorf("event %d: RecordedAt must round-trip with microsecond precision: got %v, want %v", i, e.RecordedAt, want)
		}
		if _, off := e.RecordedAt.Zone(); off != 0 {
			t.Errorf("event %d: RecordedAt must be in UTC, got zone offset %ds (%v)", i, off, e.RecordedAt)
		}
	}
}

func testVersions(t *testing.T, h *harness) {
	r1 := mustSave(t, h, "cart", "k", evs("Added", 3), nil)
	r2 := mustSave(t, h, "cart", "k", evs("Removed", 2), nil)
	r3 := mustSave(t, h, "cart", "k", evs("Paid", 1), nil)
	if r1.Version != 1 || r2.Version != 2 || r3.Version != 3 {
		t.Errorf("versions count saves, not events: saves of 3, 2 and 1 events returned versions %d, %d, %d, want 1, 2, 3", r1.Version, r2.Version, r3.Version)
	}
	agg := mustLoad(t, h, "cart", "k")
	if agg.Version != 3 {
		t.Errorf("the aggregate version is the number of saves: got %d, want 3", agg.Version)
	}
	wantVersions := []int64{1, 1, 1, 2, 2, 3}
	if len(agg.Events) != len(wantVersions) {
		t.Fatalf("got %d events, want %d", len(agg.Events), len(wantVersions))
	}
	for i, e := range agg.Events {
		if e.Version != wantVersions[i] {
			t.Errorf("event %d: every event of a save has that save's version: got Version %d, want %d", i, e.Version, wantVersions[i])
		}
		if e.Sequence != int64(i)+1 {
			t.Errorf("event %d: sequences number the aggregate's events 1..n without gaps: got %d, want %d", i, e.Sequence, i+1)
		}
	}
}

func testPositions(t *testing.T, h *harness) {
	var last int64
	for i := range 12 {
		typ := []string{"a", "b", "c"}[i%3]
		id := []string{"x", "y"}[i%2]
		res := mustSave(t, h, typ, id, evs("E", 1+i%3), nil)
		if res.Position <= last {
			t.Errorf("save %d: positions must increase across the whole store: got %d after %d", i, res.Position, last)
		}
		last = res.Position
		agg := mustLoad(t, h, typ, id)
		if got := agg.Events[len(agg.Events)-1].Position; got != res.Position {
			t.Errorf("save %d: Save must return the position of the batch's last event: got %d, stored %d", i, res.Position, got)
		}
	}
	for _, typ := range []string{"a", "b", "c"} {
		for _, id := range []string{"x", "y"} {
			agg := mustLoad(t, h, typ, id)
			for i := 1; i < len(agg.Events); i++ {
				if agg.Events[i].Position <= agg.Events[i-1].Position {
					t.Errorf("%s/%s: positions must increase in sequence order: event %d at %d after %d", typ, id, i, agg.Events[i].Position, agg.Events[i-1].Position)
				}
			}
		}
	}
}

func testIdentity(t *testing.T, h *harness) {
	a := mustSave(t, h, "user", "42", evs("UserCreated", 2), nil)
	b := mustSave(t, h, "team", "42", evs("TeamCreated", 1), nil)
	if a.Version != 1 || b.Version != 1 {
		t.Errorf("the same id under another type is a new aggregate: versions %d and %d, want 1 and 1", a.Version, b.Version)
	}
	u := mustLoad(t, h, "user", "42")
	g := mustLoad(t, h, "team", "42")
	if len(u.Events) != 2 || len(g.Events) != 1 {
		t.Fatalf("aggregates are identified by (type, id): user/42 has %d events, team/42 %d; want 2 and 1", len(u.Events), len(g.Events))
	}
	for _, e := range u.Events {
		if e.Type != "UserCreated" || e.AggregateType != "user" {
			t.Errorf("user/42 must hold only its own events, got %s of %s", e.Type, e.AggregateType)
		}
	}
	if g.Events[0].Type != "TeamCreated" || g.Events[0].Sequence != 1 {
		t.Errorf("team/42 must hold only its own event with Sequence 1, got %s with Sequence %d", g.Events[0].Type, g.Events[0].Sequence)
	}
	// An id equal up to case is another aggregate too: ids are not folded.
	if _, err := h.store.Load(t.Context(), "user", "4"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Load of user/4 must be ErrNotFound (ids match exactly), got %v", err)
	}
}

func testLoadUnknown(t *testing.T, h *harness) {
	if _, err := h.store.Load(t.Context(), "order", "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Load of an unknown aggregate in an empty store must wrap ErrNotFound, got %v", err)
	}
	mustSave(t, h, "order", "o-1", evs("Created", 1), nil)
	for _, k := range [][2]string{{"order", "o-2"}, {"invoice", "o-1"}, {"Order", "o-1"}} {
		agg, err := h.store.Load(t.Context(), k[0], k[1])
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Load of unknown aggregate %s/%s must wrap ErrNotFound, got %v (%d events)", k[0], k[1], err, len(agg.Events))
		}
	}
	if _, err := h.s.Load(t.Context(), storage.LoadQuery{AggregateType: "order", AggregateID: "o-2"}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Storage.Load of an unknown aggregate must wrap ErrNotFound, got %v", err)
	}
}

func testOwnership(t *testing.T, h *harness) {
	in := []eventstore.NewEvent{ev("Set", `{"v":"original"}`), ev("Set", `{"v":"second"}`)}
	mustSave(t, h, "box", "b", in, nil)
	// The caller may reuse its slices after Save.
	copy(in[0].Data, `{"v":"CLOBBERE"}`)
	in[1].Data[2] = 'X'

	agg := mustLoad(t, h, "box", "b")
	if string(agg.Events[0].Data) != `{"v":"original"}` || string(agg.Events[1].Data) != `{"v":"second"}` {
		t.Fatalf("Save must copy the caller's Data: after the caller changed its slices, stored data is %q and %q", agg.Events[0].Data, agg.Events[1].Data)
	}
	// The caller owns what Load returns.
	for i := range agg.Events[0].Data {
		agg.Events[0].Data[i] = '!'
	}
	agg.Events[1].ID = "mutated"
	agg.Events = append(agg.Events[:1], agg.Events[0])
	again := mustLoad(t, h, "box", "b")
	if len(again.Events) != 2 || string(again.Events[0].Data) != `{"v":"original"}` || again.Events[1].ID != strings.ToLower(in[1].ID) {
		t.Errorf("slices returned by Load belong to the caller: after mutating them, a reload returned %+v", again.Events)
	}
	// The caller owns what ReadFeed returns.
	page, err := h.s.ReadFeed(t.Context(), storage.FeedQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 2 {
		t.Fatalf("ReadFeed returned %d events, want 2", len(page.Events))
	}
	for i := range page.Events[1].Data {
		page.Events[1].Data[i] = '#'
	}
	again = mustLoad(t, h, "box", "b")
	if string(again.Events[1].Data) != `{"v":"second"}` {
		t.Errorf("slices returned by ReadFeed belong to the caller: after mutating one, Load returned %q", again.Events[1].Data)
	}
}

func testExpectVersion(t *testing.T, h *harness) {
	ctx := t.Context()
	at := func(v int64) *eventstore.SaveOptions {
		return &eventstore.SaveOptions{ExpectedVersion: storage.ExpectVersion(v)}
	}
	res := mustSave(t, h, "acct", "a", evs("Opened", 2), at(0))
	if res.Version != 1 {
		t.Errorf("ExpectVersion(0) on a new aggregate must succeed at version 1, got %d", res.Version)
	}
	if _, err := h.store.Save(ctx, "acct", "a", evs("Opened", 1), at(0)); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("ExpectVersion(0) on an existing aggregate must fail with ErrConflict, got %v", err)
	}
	res = mustSave(t, h, "acct", "a", evs("Deposited", 1), at(1))
	if res.Version != 2 {
		t.Errorf("a save with a matching expected version must succeed at the next version: got %d, want 2", res.Version)
	}
	for _, v := range []int64{1, 3, 7} {
		if _, err := h.store.Save(ctx, "acct", "a", evs("Withdrawn", 2), at(v)); !errors.Is(err, storage.ErrConflict) {
			t.Errorf("expected version %d on an aggregate at version 2 must fail with ErrConflict, got %v", v, err)
		}
	}
	agg := mustLoad(t, h, "acct", "a")
	if agg.Version != 2 || len(agg.Events) != 3 {
		t.Errorf("a save refused for its version must store nothing: aggregate at version %d with %d events, want 2 and 3", agg.Version, len(agg.Events))
	}
	if n := len(feedEvents(t, h)); n != 3 {
		t.Errorf("a save refused for its version must add nothing to the feed: it holds %d events, want 3", n)
	}
	// Without an expected version any version is accepted.
	if res := mustSave(t, h, "acct", "a", evs("Closed", 1), nil); res.Version != 3 {
		t.Errorf("a save without expected version must succeed at the next version: got %d, want 3", res.Version)
	}
}

func feedEvents(t testing.TB, h *harness) []storage.Event {
	t.Helper()
	events, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 1000})
	return events
}

func testExpectVersionConcurrent(t *testing.T, h *harness) {
	const k, rounds = 16, 4
	mustSave(t, h, "race", "r", evs("Start", 1), nil)
	for round := range rounds {
		old := int64(round + 1)
		errs := make(chan error, k)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range k {
			wg.Go(func() {
				<-start
				_, err := h.store.Save(t.Context(), "race", "r", evs("Step", 2),
					&eventstore.SaveOptions{ExpectedVersion: storage.ExpectVersion(old)})
				errs <- err
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		wins := 0
		for err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, storage.ErrConflict):
				t.Errorf("round %d: a concurrent save that loses the version race must fail with ErrConflict, got %v", round, err)
			}
		}
		if wins != 1 {
			t.Errorf("round %d: of %d concurrent saves expecting version %d exactly one must win, %d did", round, k, old, wins)
		}
		agg := mustLoad(t, h, "race", "r")
		if agg.Version != old+1 {
			t.Fatalf("round %d: after the race the version must be %d, got %d", round, old+1, agg.Version)
		}
		if want := 1 + 2*(round+1); len(agg.Events) != want {
			t.Fatalf("round %d: only the winner's events may be stored: got %d events, want %d", round, len(agg.Events), want)
		}
	}
}

func testValidation(t *testing.T, h *harness) {
	mustSave(t, h, "doc", "existing", evs("Created", 1), nil)
	bad := []struct {
		name   string
		events []eventstore.NewEvent
		field  string
	}{
		{"bad uuid", []eventstore.NewEvent{ev("A", ""), {ID: "not-a-uuid", Type: "A"}}, "events[1].eventId"},
		{"missing id", []eventstore.NewEvent{ev("A", ""), ev("A", ""), {Type: "A"}}, "events[2].eventId"},
		{"empty type", []eventstore.NewEvent{ev("A", ""), ev("A", ""), ev("", "")}, "events[2].eventType"},
		{"data array", []eventstore.NewEvent{ev("A", `{}`), ev("A", `[1,2]`)}, "events[1].data"},
		{"data string", []eventstore.NewEvent{ev("A", `"text"`)}, "events[0].data"},
		{"data number", []eventstore.NewEvent{ev("A", ""), ev("A", `12`)}, "events[1].data"},
		{"data malformed", []eventstore.NewEvent{ev("A", `{"a":`)}, "events[0].data"},
		{"empty batch", nil, "events"},
	}
	for _, c := range bad {
		for _, id := range []string{"new", "existing"} {
			_, err := h.store.Save(t.Context(), "doc", id, c.events, nil)
			if !errors.Is(err, storage.ErrInvalid) {
				t.Errorf("%s on %s: an invalid batch must fail with ErrInvalid, got %v", c.name, id, err)
				continue
			}
			var ve *eventstore.ValidationError
			if !errors.As(err, &ve) {
				t.Errorf("%s on %s: the error must be a *ValidationError, got %T %v", c.name, id, err, err)
				continue
			}
			found := false
			for _, f := range ve.Fields {
				found = found || f.Field == c.field
			}
			if !found {
				t.Errorf("%s on %s: the ValidationError must name field %q, got %+v", c.name, id, c.field, ve.Fields)
			}
		}
	}
	if _, err := h.store.Load(t.Context(), "doc", "new"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a rejected batch must store nothing: Load doc/new returned %v", err)
	}
	if agg := mustLoad(t, h, "doc", "existing"); agg.Version != 1 || len(agg.Events) != 1 {
		t.Errorf("a rejected batch must store nothing: doc/existing is at version %d with %d events, want 1 and 1", agg.Version, len(agg.Events))
	}
	if n := len(feedEvents(t, h)); n != 1 {
		t.Errorf("a rejected batch must add nothing to the feed: it holds %d events, want 1", n)
	}
}
