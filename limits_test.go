package eventstore_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/names"
)

// nested returns a JSON object nested depth levels deep.
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

// fieldOf returns the single field a *ValidationError names, or fails.
func validationFields(t *testing.T, err error) []eventstore.FieldError {
	t.Helper()
	var ve *eventstore.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, eventstore.ErrInvalid) {
		t.Fatalf("want a *ValidationError wrapping ErrInvalid, got %v", err)
	}
	return ve.Fields
}

// TestSaveRefusesDeepData: data nested deeper than MaxDataDepth is refused
// at save, naming the event, so that nothing stored is unreadable later.
func TestSaveRefusesDeepData(t *testing.T) {
	st := newStore(t)
	ctx := t.Context()
	if _, err := st.Save(ctx, "order", "ok", []eventstore.NewEvent{ev("A", nested(limits.MaxDataDepth))}, nil); err != nil {
		t.Fatalf("data exactly MaxDataDepth (%d) deep must be accepted: %v", limits.MaxDataDepth, err)
	}
	for _, depth := range []int{limits.MaxDataDepth + 1, 20000} {
		_, err := st.Save(ctx, "order", "deep", []eventstore.NewEvent{ev("A", `{}`), ev("A", nested(depth))}, nil)
		f := validationFields(t, err)
		if len(f) != 1 || f[0].Field != "events[1].data" || !strings.Contains(f[0].Message, "64") {
			t.Errorf("data %d levels deep: fields %+v, want one for events[1].data naming the limit", depth, f)
		}
	}
	if _, err := st.Load(ctx, "order", "deep"); !errors.Is(err, eventstore.ErrNotFound) {
		t.Errorf("nothing of a refused batch may be stored: Load = %v", err)
	}
	// Deep data that is not valid JSON either is still refused.
	_, err := st.Save(ctx, "order", "bad", []eventstore.NewEvent{ev("A", strings.Repeat("[", 1<<20))}, nil)
	if f := validationFields(t, err); len(f) != 1 || f[0].Field != "events[0].data" {
		t.Errorf("1 MiB of '[': fields %+v", f)
	}
	agg, err := st.Load(ctx, "order", "ok")
	if err != nil || !json.Valid(agg.Events[0].Data) {
		t.Errorf("the accepted aggregate must load: %v", err)
	}
}

// TestSaveLimitsEventsPerSave: a save of more than MaxEventsPerSave events
// is refused as a whole, with one problem.
func TestSaveLimitsEventsPerSave(t *testing.T) {
	st := newStore(t)
	batch := make([]eventstore.NewEvent, limits.MaxEventsPerSave+1)
	for i := range batch {
		batch[i] = ev("A", "")
	}
	_, err := st.Save(t.Context(), "order", "o", batch, nil)
	if f := validationFields(t, err); len(f) != 1 || f[0].Field != "events" || !strings.Contains(f[0].Message, "10000") {
		t.Errorf("fields %+v, want one for events naming the limit", f)
	}
	if _, err := st.Save(t.Context(), "order", "o", batch[:limits.MaxEventsPerSave], nil); err != nil {
		t.Errorf("a save of exactly MaxEventsPerSave events must succeed: %v", err)
	}
}

// TestValidationErrorsAreCapped: a ValidationError lists the first
// MaxFieldErrors problems and counts the rest.
func TestValidationErrorsAreCapped(t *testing.T) {
	st := newStore(t)
	batch := make([]eventstore.NewEvent, 150)
	for i := range batch {
		batch[i] = eventstore.NewEvent{ID: "x", Type: "A"}
	}
	_, err := st.Save(t.Context(), "order", "o", batch, nil)
	var ve *eventstore.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *ValidationError, got %v", err)
	}
	if len(ve.Fields) != limits.MaxFieldErrors || ve.Omitted != 150-limits.MaxFieldErrors {
		t.Errorf("%d fields and %d omitted, want %d and %d", len(ve.Fields), ve.Omitted, limits.MaxFieldErrors, 150-limits.MaxFieldErrors)
	}
	if ve.Fields[99].Field != "events[99].eventId" {
		t.Errorf("the first problems are listed, in input order; the last listed is %q", ve.Fields[99].Field)
	}
	if !strings.HasSuffix(err.Error(), "; and 50 more") {
		t.Errorf("Error() must say how many problems it leaves out: %.100q", err.Error()[len(err.Error())-60:])
	}
}

// TestCheckName: the one rule for aggregate types, ids and projection
// names, which must also be usable as URL path segments.
func TestCheckName(t *testing.T) {
	for _, s := range []string{"order", "o-1", "é", ".x", "..x", "a.b", strings.Repeat("a", 256)} {
		if err := names.Check(s); err != nil {
			t.Errorf("CheckName(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{"", ".", "..", "a/b", "/", "a\x00", "a\x7f", "\xff", strings.Repeat("a", 257)} {
		err := names.Check(s)
		if !errors.Is(err, eventstore.ErrInvalid) || err.Error() == "" || strings.HasPrefix(err.Error(), "eventstore") {
			t.Errorf("CheckName(%q) = %v, want an ErrInvalid whose text is the bare problem", s, err)
		}
	}
	st := newStore(t)
	for _, id := range []string{".", ".."} {
		_, err := st.Save(t.Context(), "order", id, []eventstore.NewEvent{ev("A", "")}, nil)
		if f := validationFields(t, err); f[0].Field != "aggregateId" {
			t.Errorf("Save to aggregate id %q: fields %+v", id, f)
		}
	}
}

// TestAddBeyondMaxDigitsIsOneError: an add whose result would exceed 1,000
// digits is an error for that event only; later events keep applying.
func TestAddBeyondMaxDigitsIsOneError(t *testing.T) {
	ctx := t.Context()
	st, p := newProjector(t)
	createOrderDef(t, p, "orders", false)
	nines := strings.Repeat("9", 1000)
	save(t, st, "order", "o1", ev("Placed", `{"total": `+nines+`}`))
	over := ev("Placed", `{"total": 1}`)
	save(t, st, "order", "o1", over)
	save(t, st, "order", "o1", ev("Placed", `{"total": -9}`))
	got, err := p.Single(ctx, "orders", "o1")
	if err != nil {
		t.Fatal(err)
	}
	if want := `"` + strings.Repeat("9", 999) + `0"`; field(t, got, "total") != want || field(t, got, "count") != `"2"` {
		t.Errorf("the event after the one that overflowed must apply: total %.20s…, count %s", field(t, got, "total"), field(t, got, "count"))
	}
	s, err := p.Status(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Errors) != 1 || s.Errors[0].EventID != over.ID || !strings.Contains(s.Errors[0].Message, "1000 digits") {
		t.Errorf("want one error, for the event that overflowed, naming the limit: %+v", s.Errors)
	}
}

// TestRawDataNumberTooLong: add's rawData of more than 1,000 digits is
// refused when the definition is created.
func TestRawDataNumberTooLong(t *testing.T) {
	_, p := newProjector(t)
	d := eventstore.Definition{Name: "p", Feed: "order", Handlers: []eventstore.Handler{{EventType: "A", Functions: []eventstore.Function{
		{Name: eventstore.FuncAdd, TargetSelector: "$.projection.n", RawData: []byte(strings.Repeat("1", 1001))},
	}}}}
	f := validationFields(t, p.Create(t.Context(), d))
	if len(f) != 1 || f[0].Field != "handlers[0].functions[0].rawData" || !strings.Contains(f[0].Message, "more than 1000 digits") {
		t.Errorf("fields %+v: want one for rawData naming the limit", f)
	}
}
