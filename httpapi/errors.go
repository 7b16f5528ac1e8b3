package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/safetext"
)

// Kinds of errors of the HTTP layer itself; the rest come from the
// eventstore. Their texts are never shown: an *apiError carries the
// message.
var (
	errMalformed     = errors.New("malformed request")
	errUnauthorized  = errors.New("unauthorized")
	errMethod        = errors.New("method not allowed")
	errMediaType     = errors.New("unsupported media type")
	errForbidden     = errors.New("forbidden")
	errUnsupported   = errors.New("unsupported")
	errUnknownTenant = errors.New("unknown tenant")
)

// apiError is an error of the HTTP layer: its text is written to the
// client as it is, and kind (errMalformed, eventstore.ErrNotFound, ...)
// picks the status.
type apiError struct {
	kind   error
	msg    string
	fields []eventstore.FieldError
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.kind }

// apiErr returns an *apiError of kind with a formatted message.
func apiErr(kind error, format string, args ...any) error {
	return &apiError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// pathError is a bad path segment: 400, naming the segment.
type pathError struct {
	msg    string
	fields []eventstore.FieldError
}

func (e *pathError) Error() string { return e.msg }
func (e *pathError) Unwrap() error { return errMalformed }

// problem is what a client is told about a failed request.
type problem struct {
	status  int
	code    string
	message string
	fields  []eventstore.FieldError
	omitted int
}

// errorRule is one row of errorTable: the errors it matches, the status
// and code they get, and the message a client reads.
type errorRule struct {
	match   func(error) bool
	status  int
	code    string
	message func(r *http.Request, err error) string
}

func is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// errorTable is the one translation from errors to what a client reads:
// the first matching row wins. Messages speak the API's language: an
// *apiError, *pathError or *queryError is text of this package and is
// shown as it is; a library error gets a message made from the request
// (the aggregate, feed or projection it names), never the error's own
// text, which holds Go wrapping and backend details. 5xx messages are
// generic; fail logs the full error with the request id.
var errorTable = []errorRule{
	{is(errUnauthorized), http.StatusUnauthorized, "unauthorized", func(_ *http.Request, err error) string {
		if s, ok := shown(err); ok {
			return s
		}
		return "missing or wrong credentials: send the key pair in " + HeaderSerializedAccessKey + " and " +
			HeaderSerializedSecretAccessKey + ", or in " + HeaderAccessKey + " and " + HeaderSecretAccessKey
	}},
	{is(errForbidden), http.StatusForbidden, "forbidden", ownText},
	{is(errMethod), http.StatusMethodNotAllowed, "method_not_allowed", ownText},
	{is(errUnsupported), http.StatusBadRequest, "unsupported", ownText},
	{is(errUnknownTenant), http.StatusBadRequest, "unknown_tenant", ownText},
	{is(errMediaType), http.StatusUnsupportedMediaType, "unsupported_media_type", ownText},
	{func(err error) bool { var e *http.MaxBytesError; return errors.As(err, &e) }, http.StatusRequestEntityTooLarge, "too_large",
		func(_ *http.Request, err error) string {
			var e *http.MaxBytesError
			errors.As(err, &e)
			return fmt.Sprintf("the body is larger than the limit of %d bytes", e.Limit)
		}},
	{func(err error) bool { return errors.Is(err, errMalformed) },
		http.StatusBadRequest, "malformed", func(r *http.Request, err error) string {
			if s, ok := shown(err); ok {
				return s
			}
			return "the body is not valid JSON"
		}},
	{func(err error) bool { var e *eventstore.CursorAheadError; return errors.As(err, &e) }, http.StatusConflict, "cursor_ahead",
		func(r *http.Request, err error) string {
			var e *eventstore.CursorAheadError
			errors.As(err, &e)
			feed := "_all"
			if e.AggregateType != "" {
				feed = e.AggregateType
			}
			return fmt.Sprintf("since %d is past the head of feed %q, %d: send back only a sequenceNumber this feed gave "+
				"(a store restored from a backup, or a replica that took over before it had the latest events, can be behind its readers)",
				e.Cursor, clip(feed), e.Head)
		}},
	{is(eventstore.ErrInvalid), http.StatusUnprocessableEntity, "invalid", invalidMessage},
	{is(eventstore.ErrNotFound), http.StatusNotFound, "not_found", notFoundMessage},
	{is(eventstore.ErrConflict), http.StatusConflict, "conflict", conflictMessage},
	{is(eventstore.ErrFull), http.StatusInsufficientStorage, "insufficient_storage", func(*http.Request, error) string {
		return "the store is out of space: nothing was stored; saving succeeds again once an operator frees space"
	}},
	{is(eventstore.ErrClosed), http.StatusServiceUnavailable, "unavailable", func(*http.Request, error) string {
		return "the service is shutting down; retry on another instance or later"
	}},
	{func(err error) bool {
		return errors.Is(err, eventstore.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
	}, http.StatusServiceUnavailable, "unavailable", func(*http.Request, error) string {
		return "the service is unavailable, retry later"
	}},
}

// internalRule answers what no row of errorTable matches.
var internalRule = errorRule{status: http.StatusInternalServerError, code: "internal",
	message: func(*http.Request, error) string { return "internal error" }}

// shown returns the text of this package's own error in err's chain.
func shown(err error) (string, bool) {
	var ae *apiError
	var pe *pathError
	var qe *queryError
	switch {
	case errors.As(err, &ae):
		return ae.msg, true
	case errors.As(err, &pe):
		return pe.msg, true
	case errors.As(err, &qe):
		return qe.Error(), true
	}
	return "", false
}

// detailAfter returns the detail a library error gives after its
// sentinel, as in fmt.Errorf("%w: a definition may be at most %d bytes",
// ErrInvalid, n), or "" when there is none or it names a backend.
func detailAfter(err, sentinel error) string {
	text := err.Error()
	i := strings.Index(text, sentinel.Error()+": ")
	if i < 0 {
		return ""
	}
	d := text[i+len(sentinel.Error())+2:]
	if strings.Contains(d, "eventstore: ") || strings.Contains(d, "sqlite") || strings.Contains(d, "postgres") || strings.Contains(d, "pgx") {
		return ""
	}
	return d
}

// ownText is the message of errors that only this package makes.
func ownText(_ *http.Request, err error) string {
	if s, ok := shown(err); ok {
		return s
	}
	return "the request was refused"
}

// invalidMessage is the message of a 422: the problem when there is one,
// else their number, so that each problem is written once, in errors.
func invalidMessage(_ *http.Request, err error) string {
	if s, ok := shown(err); ok {
		return s
	}
	var ve *eventstore.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) == 0 {
		if d := detailAfter(err, eventstore.ErrInvalid); d != "" {
			return d
		}
		return "the request is invalid"
	}
	n := len(ve.Fields) + ve.Omitted
	switch {
	case n == 1 && ve.Fields[0].Field == "":
		return ve.Fields[0].Message
	case n == 1:
		return ve.Fields[0].Field + ": " + ve.Fields[0].Message
	case ve.Omitted > 0:
		return fmt.Sprintf("%d problems, the first %d listed in errors", n, len(ve.Fields))
	}
	return fmt.Sprintf("%d problems, listed in errors", n)
}

// notFoundMessage names what the request looked for.
func notFoundMessage(r *http.Request, err error) string {
	if s, ok := shown(err); ok {
		return s
	}
	typ, id, name := r.PathValue("type"), r.PathValue("id"), r.PathValue("name")
	switch r.Pattern {
	case patAggregateEvents, patAggregate, patTypeEvents:
		if id == "" {
			id = "events"
		}
		return fmt.Sprintf("aggregate %s/%s was not found", clip(typ), clip(id))
	case patType:
		return fmt.Sprintf("aggregate type %q has no aggregates", clip(typ))
	case patFeed:
		return fmt.Sprintf("feed %q has no events", clip(typ))
	case patReactionDef:
		return fmt.Sprintf("reaction definition %q was not found", clip(name))
	case patReaction, patReactionExecute, muxPattern(patReactionExecute):
		return fmt.Sprintf("reaction %q was not found", clip(r.PathValue("reactionId")))
	case patTenant:
		return fmt.Sprintf("tenant %q was not found", clip(r.PathValue("tenantId")))
	case patDefinition, patSingleList, patSingleCount, patSingle, patAggregated:
		return fmt.Sprintf("projection %q was not found", clip(name))
	}
	return fmt.Sprintf("nothing was found at %s", clip(r.URL.Path))
}

// conflictMessage says what a conflict is about.
func conflictMessage(r *http.Request, err error) string {
	if s, ok := shown(err); ok {
		return s
	}
	var be *eventstore.BatchError
	var ce *eventstore.ConflictError
	if errors.As(err, &ce) {
		what := fmt.Sprintf("aggregate %s/%s is at version %d, not the expectedVersion %s", clip(ce.AggregateType), clip(ce.AggregateID), ce.Current, ce.Expected)
		switch {
		case ce.ReusedID != "":
			what = fmt.Sprintf("event id %s is already stored in aggregate %s/%s with a different %s "+
				"(a retry must resend the same event; a new event needs a new id)", ce.ReusedID, clip(ce.AggregateType), clip(ce.AggregateID), ce.Differs)
		case ce.StoredIDs > 0:
			what = fmt.Sprintf("%d of the %d event ids are already stored in aggregate %s/%s and the others are not "+
				"(a retry must resend the same events)", ce.StoredIDs, ce.Events, clip(ce.AggregateType), clip(ce.AggregateID))
		}
		if errors.As(err, &be) {
			return fmt.Sprintf("batch %d was refused: %s; nothing was stored", be.Index, what)
		}
		return what + "; nothing was stored"
	}
	if errors.As(err, &be) {
		return fmt.Sprintf("batch %d (aggregate %s/%s) was refused: the aggregate is not at its expectedVersion, "+
			"or the batch mixes stored and new event ids; nothing was stored", be.Index, clip(be.AggregateType), clip(be.AggregateID))
	}
	switch r.Pattern {
	case patAggregateEvents:
		return fmt.Sprintf("aggregate %s/%s is not at the expectedVersion, or the events mix stored and new event ids; nothing was stored",
			clip(r.PathValue("type")), clip(r.PathValue("id")))
	case patTypeEvents:
		return "the aggregate is not at the expectedVersion, or the events mix stored and new event ids; nothing was stored"
	case patDefinitions:
		return "a projection definition of that name exists; PUT /projections/definitions/{name} replaces one"
	}
	return "the request conflicts with the stored state; nothing was changed"
}

// ruleFor returns the first row of errorTable matching err, or
// internalRule.
func ruleFor(err error) errorRule {
	for _, row := range errorTable {
		if row.match(err) {
			return row
		}
	}
	return internalRule
}

// status returns the status and code err is answered with.
func status(err error) (int, string) {
	rule := ruleFor(err)
	return rule.status, rule.code
}

// translate maps err to what the client is told.
func translate(r *http.Request, err error) problem {
	rule := ruleFor(err)
	p := problem{status: rule.status, code: rule.code, message: oneLine(rule.message(r, err))}
	var ve *eventstore.ValidationError
	var ae *apiError
	var pe *pathError
	var qe *queryError
	switch {
	case errors.As(err, &ve):
		p.fields, p.omitted = ve.Fields, ve.Omitted
	case errors.As(err, &ae):
		p.fields = ae.fields
	case errors.As(err, &pe):
		p.fields = pe.fields
	case errors.As(err, &qe):
		p.fields = []eventstore.FieldError{{Field: qe.param, Message: qe.msg}}
	}
	var be *eventstore.BatchError
	var ce *eventstore.CursorAheadError
	if p.fields == nil && errors.As(err, &ce) {
		p.fields = []eventstore.FieldError{{Field: "since", Message: fmt.Sprintf("must be at most the feed's head, %d, got %d", ce.Head, ce.Cursor)}}
	}
	if p.fields == nil && errors.As(err, &be) {
		p.fields = []eventstore.FieldError{{Field: fmt.Sprintf("batches[%d]", be.Index),
			Message: "not at its expectedVersion, or mixing stored and new event ids"}}
	}
	return p
}

// oneLine makes s safe to show: valid UTF-8, control characters (newlines
// among them) replaced by spaces.
func oneLine(s string) string {
	s = safetext.Clean(s)
	if strings.IndexFunc(s, isControl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, s)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// fail answers r with the error err maps to. Client errors say what is
// wrong; server errors get a generic message with the request id, and the
// full error is logged beside that id.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	id := w.Header().Get(HeaderRequestID)
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		h.log.Debug("httpapi: client went away", "requestId", id, "method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	p := translate(r, err)
	switch {
	case p.status == http.StatusServiceUnavailable:
		h.log.Warn("httpapi: unavailable", "requestId", id, "method", r.Method, "path", r.URL.Path, "err", err)
		if !errors.Is(err, eventstore.ErrClosed) {
			w.Header().Set("Retry-After", "1")
		}
		p.message += " (request id " + id + ")"
	case p.status >= 500:
		h.log.Error("httpapi: internal error", "requestId", id, "method", r.Method, "path", r.URL.Path, "err", err)
		p.message += " (request id " + id + ")"
	default:
		h.log.Debug("httpapi: request refused", "requestId", id, "method", r.Method, "path", r.URL.Path, "status", p.status, "err", err)
	}
	writeErrorBody(w, p.status, errorBody{Code: p.code, Message: p.message, Errors: p.fields, Omitted: p.omitted, RequestID: id})
}

// errorBody is the one shape of every error response.
type errorBody struct {
	// Code is a stable word per status, for programs.
	Code string `json:"code"`
	// Message says what is wrong, for people.
	Message string `json:"message"`
	// Errors lists the problems field by field; empty when the problem
	// is not about a field.
	Errors []eventstore.FieldError `json:"errors"`
	// Omitted counts the problems beyond those listed in Errors.
	Omitted int `json:"omitted,omitempty"`
	// RequestID is the X-Request-Id of the response.
	RequestID string `json:"requestId"`
}

// encodeError returns the JSON text of eb, ending with a newline, with
// <, > and & as they are.
func encodeError(eb errorBody) []byte {
	eb.Message = oneLine(eb.Message)
	fields := make([]eventstore.FieldError, len(eb.Errors)) // never null; not the caller's
	for i, f := range eb.Errors {
		fields[i] = eventstore.FieldError{Field: oneLine(f.Field), Message: oneLine(f.Message)}
	}
	eb.Errors = fields
	var buf strings.Builder
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(eb); err != nil { // cannot happen: strings and a slice of strings
		return []byte(`{"code":"internal","message":"internal error","errors":[]}` + "\n")
	}
	return []byte(buf.String())
}

func writeErrorBody(w http.ResponseWriter, code int, eb errorBody) {
	body := encodeError(eb)
	hd := w.Header()
	hd.Del("Content-Encoding")
	hd.Del("ETag")
	hd.Del("Last-Modified")
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	hd.Set("Vary", "Accept-Encoding")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
