package storagetest

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func errorTextCases() []testCase {
	return []testCase{
		{"CommitProjectionAnyErrorText", "a commit whose errors hold invalid UTF-8, NUL bytes or long multi-byte text succeeds and moves the checkpoint; the errors read back as valid UTF-8 without NUL (invalid bytes replaced by U+FFFD, NUL dropped), valid text unchanged", testCommitErrorText},
		{"ProjectorRecordsMultiByteErrors", "an event whose error message quotes multi-byte input is recorded and the projection moves past it", testProjectorMultiByteError},
	}
}

// cleanText is what the Storage contract says a recorded text becomes.
func cleanText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

func testCommitErrorText(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 2)
	mustCreate(t, h, newDef("p"))
	long := strings.Repeat("é", 10_000)
	commits := [][]storage.ProjectionError{
		{{Position: events[0].Position, EventID: events[0].ID, EventType: "Placed\xff", InstanceID: "o\x00a",
			Message: "bad \xff\xfe text with a NUL \x00 and a cut é\xc3"}},
		{{Position: events[1].Position, EventID: events[1].ID, EventType: "Placed", InstanceID: "ob", Message: long}},
	}
	from := int64(0)
	var want []storage.ProjectionError
	for i, errs := range commits {
		c := storage.ProjectionCommit{Name: "p", From: from, To: events[i].Position, Errors: errs}
		if err := h.s.CommitProjection(ctx, c); err != nil {
			t.Fatalf("commit %d of errors with text %.40q...: %v", i, errs[0].Message, err)
		}
		from = c.To
		for _, e := range errs {
			e.EventID, e.EventType, e.InstanceID, e.Message = cleanText(e.EventID), cleanText(e.EventType), cleanText(e.InstanceID), cleanText(e.Message)
			want = append(want, e)
		}
	}
	d := mustDefinition(t, h, "p")
	if d.Checkpoint != from {
		t.Errorf("the checkpoint must advance past errors of any text: it is %d, want %d", d.Checkpoint, from)
	}
	if len(d.Errors) != len(want) {
		t.Fatalf("%d errors recorded, want %d", len(d.Errors), len(want))
	}
	for i, got := range d.Errors {
		for _, s := range []string{got.EventID, got.EventType, got.InstanceID, got.Message} {
			if !utf8.ValidString(s) || strings.Contains(s, "\x00") {
				t.Errorf("error %d: text %.60q is not valid UTF-8 without NUL", i, s)
			}
		}
		if got != want[i] {
			t.Errorf("error %d reads back as %.80q/%.80q, want %.80q/%.80q", i, got.EventType, got.Message, want[i].EventType, want[i].Message)
		}
	}
	if d.Errors[1].Message != long {
		t.Errorf("a long valid multi-byte message must read back unchanged")
	}
}

func testProjectorMultiByteError(t *testing.T, h *harness) {
	ctx := t.Context()
	p := eventstore.NewProjector(h.store, nil)
	err := p.Create(ctx, eventstore.Definition{Name: "sum", Feed: "order", Handlers: []eventstore.Handler{{
		EventType: "Placed",
		Functions: []eventstore.Function{{Name: eventstore.FuncAdd, TargetSelector: "$.projection.total", EventSelector: "$.event.total"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	// Not a number: the error message quotes the input, shortened; one
	// byte of offset puts every cut in the middle of a two-byte rune.
	for _, prefix := range []string{"", "x"} {
		mustSave(t, h, "order", "o-"+prefix, []eventstore.NewEvent{ev("Placed", `{"total":"`+prefix+strings.Repeat("é", 200)+`"}`)}, nil)
	}
	mustSave(t, h, "order", "o-", []eventstore.NewEvent{ev("Placed", `{"total":2}`)}, nil)
	got, err := p.Single(ctx, "sum", "o-")
	if err != nil {
		t.Fatalf("the projection must move past events whose error quotes multi-byte text: %v", err)
	}
	if n, err := number(got.Data, "total"); err != nil || n != 2 {
		t.Errorf("the event after the errors must apply: %s", got.Data)
	}
	st, err := p.Status(ctx, "sum")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Errors) != 2 {
		t.Fatalf("want the 2 events in error recorded, got %+v", st.Errors)
	}
	for _, e := range st.Errors {
		if !utf8.ValidString(e.Message) || len(e.Message) > 1024 {
			t.Errorf("recorded message %.80q: want valid UTF-8 of at most 1 KiB", e.Message)
		}
	}
}
