package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/eventkit-go/eventstore"
)

// Errors of the HTTP layer itself; the rest come from the eventstore.
var (
	errMalformed    = errors.New("malformed request")
	errUnauthorized = errors.New("missing or wrong " + HeaderAccessKey + " / " + HeaderSecretAccessKey)
	errMethod       = errors.New("method not allowed")
	errMediaType    = errors.New("unsupported media type")
	errForbidden    = errors.New("forbidden")
)

// pathError is a bad path segment: 400, naming the segment.
type pathError struct {
	msg    string
	fields []eventstore.FieldError
}

func (e *pathError) Error() string { return "bad path: " + e.msg }
func (e *pathError) Unwrap() error { return errMalformed }

// status is the one table from errors to HTTP statuses and error codes.
func status(err error) (int, string) {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, errUnauthorized):
		return http.StatusUnauthorized, "unauthorized"
	case errors.Is(err, errForbidden):
		return http.StatusForbidden, "forbidden"
	case errors.Is(err, errMethod):
		return http.StatusMethodNotAllowed, "method_not_allowed"
	case errors.Is(err, errMediaType):
		return http.StatusUnsupportedMediaType, "unsupported_media_type"
	case errors.As(err, &tooLarge):
		return http.StatusRequestEntityTooLarge, "too_large"
	case errors.Is(err, errMalformed), errors.Is(err, eventstore.ErrMalformed):
		return http.StatusBadRequest, "malformed"
	case errors.Is(err, eventstore.ErrInvalid):
		return http.StatusUnprocessableEntity, "invalid"
	case errors.Is(err, eventstore.ErrNotFound):
		return http.StatusNotFound, "not_found"
	case errors.Is(err, eventstore.ErrConflict):
		return http.StatusConflict, "conflict"
	case errors.Is(err, eventstore.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, eventstore.ErrClosed):
		return http.StatusServiceUnavailable, "unavailable"
	}
	return http.StatusInternalServerError, "internal"
}

// fail answers r with the error err maps to. Client errors say what is
// wrong; server errors get a generic message and the details are logged.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		h.log.Debug("httpapi: client went away", "method", r.Method, "path", r.URL.Path, "err", err)
		return
	}
	code, name := status(err)
	msg := err.Error()
	switch {
	case code == http.StatusServiceUnavailable:
		h.log.Warn("httpapi: unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "the service is unavailable, retry later"
		if errors.Is(err, eventstore.ErrClosed) {
			msg = "the service is shutting down"
		} else {
			w.Header().Set("Retry-After", "1")
		}
	case code >= 500:
		h.log.Error("httpapi: internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		msg = "internal error"
	default:
		h.log.Debug("httpapi: request refused", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
	}
	body := errorBody{Code: name, Message: msg}
	var ve *eventstore.ValidationError
	var pe *pathError
	var qe *queryError
	switch {
	case errors.As(err, &ve):
		body.Errors, body.Omitted = ve.Fields, ve.Omitted
		body.Message = summary(ve)
	case errors.As(err, &pe):
		body.Errors = pe.fields
	case errors.As(err, &qe):
		body.Errors = []eventstore.FieldError{{Field: qe.param, Message: qe.msg}}
	}
	writeErrorBody(w, code, body)
}

// summary is the message of a 422: the problem when there is one, else
// their number, so that each problem is written once, in errors.
func summary(ve *eventstore.ValidationError) string {
	n := len(ve.Fields) + ve.Omitted
	if n <= 1 {
		return ve.Error()
	}
	op := ""
	if ve.Op != "" {
		op = ve.Op + ": "
	}
	if ve.Omitted > 0 {
		return fmt.Sprintf("eventstore: %sinvalid input: %d problems, the first %d listed", op, n, len(ve.Fields))
	}
	return fmt.Sprintf("eventstore: %sinvalid input: %d problems", op, n)
}

type errorBody struct {
	Code    string                  `json:"code"`
	Message string                  `json:"message"`
	Errors  []eventstore.FieldError `json:"errors,omitempty"`
	// Omitted counts the problems beyond those listed in Errors.
	Omitted int `json:"omitted,omitempty"`
}

func writeErrorBody(w http.ResponseWriter, code int, eb errorBody) {
	body, err := json.Marshal(eb)
	if err != nil { // cannot happen: strings and a slice of strings
		body = []byte(`{"code":"internal","message":"internal error"}`)
	}
	body = append(body, '\n')
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	hd.Set("Vary", "Accept-Encoding")
	hd.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
