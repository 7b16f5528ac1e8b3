package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
)

// TestErrorTable: every sentinel and error type of the library and of this
// package, wrapped as backends and the Store wrap them, maps to its status
// and code and to a message in the API's language.
func TestErrorTable(t *testing.T) {
	backend := func(err error) error { // as a backend and the Store wrap
		return fmt.Errorf("save order/o-1: sqlite: append: UNIQUE constraint failed: events.id <x>: %w", err)
	}
	ve := &eventstore.ValidationError{Op: "save", Fields: []eventstore.FieldError{{Field: "events[0].eventId", Message: "is required"}}}
	cases := []struct {
		name    string
		pattern string
		err     error
		status  int
		code    string
		msg     string // a part of the message
	}{
		{"ErrNotFound aggregate", patAggregate, backend(eventstore.ErrNotFound), 404, "not_found", "aggregate order/o-1 was not found"},
		{"ErrNotFound feed", patFeed, backend(eventstore.ErrNotFound), 404, "not_found", `feed "order" has no events`},
		{"ErrNotFound type", patType, backend(eventstore.ErrNotFound), 404, "not_found", `aggregate type "order" has no aggregates`},
		{"ErrNotFound definition", patDefinition, backend(eventstore.ErrNotFound), 404, "not_found", `projection "p" was not found`},
		{"ErrNotFound reaction definition", patReactionDef, backend(eventstore.ErrNotFound), 404, "not_found", `reaction definition "p" was not found`},
		{"ErrNotFound reaction", patReaction, backend(eventstore.ErrNotFound), 404, "not_found", `reaction "r-1" was not found`},
		{"ErrNotFound reaction execute", patReactionExecute, backend(eventstore.ErrNotFound), 404, "not_found", `reaction "r-1" was not found`},
		{"ErrNotFound tenant", patTenant, backend(eventstore.ErrNotFound), 404, "not_found", `tenant "t-1" was not found`},
		{"ErrNotFound aggregated list", patAggregatedList, backend(eventstore.ErrNotFound), 404, "not_found", `nothing was found at /x`},
		{"cursor ahead", patFeed, backend(&eventstore.CursorAheadError{AggregateType: "order", Cursor: 41, Head: 3}), 409, "cursor_ahead",
			`since 41 is past the head of feed "order", 3`},
		{"ErrConflict save", patAggregateEvents, backend(eventstore.ErrConflict), 409, "conflict", "aggregate order/o-1 is not at the expectedVersion"},
		{"version conflict", patAggregateEvents, backend(&eventstore.ConflictError{AggregateType: "order", AggregateID: "o-1", Current: 2,
			Expected: eventstore.ExpectVersion(1)}), 409, "conflict", "aggregate order/o-1 is at version 2, not the expectedVersion 1; nothing was stored"},
		{"ids conflict", patAggregateEvents, backend(&eventstore.ConflictError{AggregateType: "order", AggregateID: "o-1", Current: 2,
			StoredIDs: 1, Events: 3}), 409, "conflict", "1 of the 3 event ids are already stored in aggregate order/o-1"},
		{"batch version conflict", patTypeEvents, &eventstore.BatchError{Index: 4, AggregateType: "order", AggregateID: "o-2",
			Err: &eventstore.ConflictError{AggregateType: "order", AggregateID: "o-2", Current: 0, Expected: eventstore.ExpectVersion(3)}},
			409, "conflict", "batch 4 was refused: aggregate order/o-2 is at version 0, not the expectedVersion 3"},
		{"ErrConflict definition", patDefinitions, backend(eventstore.ErrConflict), 409, "conflict", "a projection definition of that name exists"},
		{"*BatchError", patTypeEvents, backend(&eventstore.BatchError{Index: 2, AggregateType: "order", AggregateID: "o-9",
			Err: fmt.Errorf("pq: conflict: %w", eventstore.ErrConflict)}), 409, "conflict", "batch 2 (aggregate order/o-9) was refused"},
		{"ErrInvalid", patDefinitions, fmt.Errorf("%w: a definition may be at most 5 bytes", eventstore.ErrInvalid), 422, "invalid", "a definition may be at most 5 bytes"},
		{"ErrInvalid from a backend", patAggregateEvents, backend(fmt.Errorf("postgres: invalid byte sequence: %w", eventstore.ErrInvalid)), 422, "invalid", "the request is invalid"},
		{"*ValidationError", patAggregateEvents, fmt.Errorf("wrapped: %w", ve), 422, "invalid", "events[0].eventId: is required"},
		{"ErrClosed", patAggregate, backend(eventstore.ErrClosed), 503, "unavailable", "shutting down"},
		{"ErrUnavailable", patAggregate, backend(eventstore.ErrUnavailable), 503, "unavailable", "unavailable, retry later"},
		{"deadline", patAggregate, backend(context.DeadlineExceeded), 503, "unavailable", "unavailable"},
		{"unknown error", patAggregate, errors.New("sqlite: disk I/O error\nSELECT * FROM events"), 500, "internal", "internal error"},
		{"unauthorized", patAggregate, errUnauthorized, 401, "unauthorized", "Serialized-Access-Key"},
		{"wrong deleteToken", patAggregate, apiErr(errForbidden, "the deleteToken is wrong"), 403, "forbidden", "deleteToken is wrong"},
		{"method", patAggregate, apiErr(errMethod, "method PUT is not allowed"), 405, "method_not_allowed", "PUT is not allowed"},
		{"media type", patAggregateEvents, apiErr(errMediaType, "Content-Type must be application/json"), 415, "unsupported_media_type", "Content-Type"},
		{"too large", patAggregateEvents, fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 10}), 413, "too_large", "limit of 10 bytes"},
		{"tenant", patAggregate, apiErr(errUnsupported, "tenants are not supported"), 400, "unsupported", "tenants"},
		{"path", patAggregate, &pathError{msg: "aggregateId must not be empty"}, 400, "malformed", "aggregateId must not be empty"},
		{"query", patFeed, &queryError{"limit", "must be an integer"}, 400, "malformed", "query parameter limit must be an integer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/x", nil)
			r.Pattern = c.pattern
			r.SetPathValue("type", "order")
			r.SetPathValue("id", "o-1")
			r.SetPathValue("name", "p")
			r.SetPathValue("reactionId", "r-1")
			r.SetPathValue("tenantId", "t-1")
			p := translate(r, c.err)
			if p.status != c.status || p.code != c.code {
				t.Errorf("status %d %s, want %d %s", p.status, p.code, c.status, c.code)
			}
			if !strings.Contains(p.message, c.msg) {
				t.Errorf("message %q does not contain %q", p.message, c.msg)
			}
			for _, bad := range []string{"eventstore:", "sqlite", "pq:", "postgres", "SELECT", "UNIQUE", "\n", "<x>"} {
				if strings.Contains(p.message, bad) {
					t.Errorf("message %q shows %q", p.message, bad)
				}
			}
		})
	}
}

// TestErrorBodyShape: one shape, errors always an array, no HTML escaping.
func TestErrorBodyShape(t *testing.T) {
	got := string(encodeError(errorBody{Code: "invalid", Message: "a <b> & c\nd", RequestID: "r"}))
	want := `{"code":"invalid","message":"a <b> & c d","errors":[],"requestId":"r"}` + "\n"
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
