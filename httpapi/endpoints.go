package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/names"
)

// segments returns the named path values, unescaped, or a *pathError
// (400) naming every one that names.Check refuses: empty, "." or
// ".." (also escaped, as %2e%2e), longer than 256 bytes, not UTF-8, or
// holding '/' (an escaped %2F) or a control character.
func segments(r *http.Request, keys ...string) ([]string, error) {
	vals := make([]string, len(keys))
	var fields []eventstore.FieldError
	for i, n := range keys {
		v := r.PathValue(n)
		vals[i] = v
		if err := names.Check(v); err != nil {
			fields = append(fields, eventstore.FieldError{Field: pathFieldName(n), Message: err.Error()})
		}
	}
	if fields != nil {
		return nil, &pathError{msg: fields[0].Field + " " + fields[0].Message, fields: fields}
	}
	return vals, nil
}

// pathFieldName names a path wildcard as the JSON bodies do.
func pathFieldName(wildcard string) string {
	switch wildcard {
	case "type":
		return "aggregateType"
	case "id":
		return "aggregateId"
	case "name":
		return "projectionName"
	}
	return wildcard
}

// readJSON checks the Content-Type and reads the body within the limit.
func (h *handler) readJSON(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if err := checkJSONType(r.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	if r.ContentLength > h.maxBody {
		return nil, &http.MaxBytesError{Limit: h.maxBody}
	}
	// One byte more than announced, so that reading to EOF takes one
	// allocation.
	buf := make([]byte, 0, max(r.ContentLength, 511)+1)
	body, err := readAll(buf, http.MaxBytesReader(w, r.Body, h.maxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, fmt.Errorf("read body: %w", err)
	case err != nil:
		return nil, apiErr(errMalformed, "reading the body failed")
	}
	return body, nil
}

// checkJSONType accepts a Content-Type of application/json, with no
// parameter but charset=utf-8; the usual spellings skip the parser.
func checkJSONType(ct string) error {
	switch ct {
	case "application/json", "application/json; charset=utf-8", "application/json; charset=UTF-8", "application/json;charset=utf-8":
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return apiErr(errMediaType, "Content-Type must be application/json, got %q", clip(ct))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return apiErr(errMediaType, "the charset must be utf-8, got %q", clip(cs))
	}
	return nil
}

// readAll appends what rd holds to buf, as io.ReadAll does from an empty
// buffer.
func readAll(buf []byte, rd io.Reader) ([]byte, error) {
	for {
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // let append pick the growth
		}
	}
}

// save serves POST /aggregates/{type}/{id}/events.
func (h *handler) save(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "type", "id")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body, err := h.readJSON(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	req, err := decodeSave(body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if req.AggregateID != nil && *req.AggregateID != seg[1] {
		h.fail(w, r, &eventstore.ValidationError{Op: "save", Fields: []eventstore.FieldError{{
			Field:   "aggregateId",
			Message: fmt.Sprintf("is %q but the path names %q", clip(*req.AggregateID), seg[1]),
		}}})
		return
	}
	var opts *eventstore.SaveOptions
	if req.ExpectedVersion != nil {
		opts = &eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(*req.ExpectedVersion)}
	}
	res, err := h.store(r).Save(r.Context(), seg[0], seg[1], req.Events, opts)
	if err != nil {
		if errors.Is(err, eventstore.ErrConflict) {
			err = saveConflict(seg[0], seg[1], req.ExpectedVersion, err)
		}
		h.fail(w, r, err)
		return
	}
	if !res.Duplicate {
		h.saves.add(time.Now(), 1, len(req.Events))
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// aggregateJSON is the body of a load.
type aggregateJSON struct {
	AggregateID      string      `json:"aggregateId"`
	AggregateType    string      `json:"aggregateType"`
	AggregateVersion int64       `json:"aggregateVersion"`
	Events           []eventJSON `json:"events"`
	// HasMore reports versions after the returned ones (see since, limit).
	HasMore bool `json:"hasMore"`
}

type eventJSON struct {
	EventID   string          `json:"eventId"`
	EventType string          `json:"eventType"`
	Data      json.RawMessage `json:"data,omitempty"`
	// EncryptedData is the opaque string saved with the event, if any.
	EncryptedData string `json:"encryptedData,omitempty"`
	// Metadata is the event's metadata as one object of strings:
	// correlationId, causationId and the caller's keys; omitted when the
	// event has none.
	Metadata map[string]string `json:"metadata,omitempty"`
	Version  int64             `json:"version"`
	Sequence int64             `json:"sequence"`
	Position int64             `json:"position"`
	// RecordedAt is in milliseconds since the Unix epoch, like updatedAt.
	RecordedAt int64 `json:"recordedAt"`
}

// load serves GET /aggregates/{type}/{id}?since=&limit=: the versions in
// (since, since+limit].
func (h *handler) load(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "type", "id")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	qp, err := parseQuery(r, "since", "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	since, err := qp.int("since", 0, 0, math.MaxInt64)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit, err := qp.int("limit", defaultLoadLimit, 1, maxLoadLimit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.streamLoad(w, r, seg[0], seg[1], since, limit)
}

// createDefinition serves POST /projections/definitions. It answers with
// the definition as stored.
func (h *handler) createDefinition(w http.ResponseWriter, r *http.Request) {
	body, err := h.readJSON(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d, err := decodeDefinition(body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := h.proj(r).Create(r.Context(), d); err != nil {
		h.fail(w, r, h.codeConflict(r, d.Name, err))
		return
	}
	if err := h.definitionChanged(r, d.Name, false); err != nil {
		h.fail(w, r, err)
		return
	}
	h.sendValue(w, r, d)
}

// queryAggregated serves GET /projections/aggregated/{name}.
func (h *handler) queryAggregated(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "name")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p, err := h.proj(r).Aggregated(r.Context(), seg[0])
	if err != nil {
		err = h.projectionNotFound(r.Context(), seg[0], "", true, err)
		h.fail(w, r, err)
		return
	}
	h.sendProjection(w, r, p)
}

// saveConflict says why a save of typ/id was refused with ErrConflict: a
// *eventstore.ConflictError says it itself (conflictMessage); otherwise,
// without an expected version, only because its events mix stored and new
// ids.
func saveConflict(typ, id string, expected *int64, err error) error {
	var ce *eventstore.ConflictError
	if errors.As(err, &ce) {
		return err
	}
	msg := fmt.Sprintf("the events mix ids stored in aggregate %s/%s already with new ones; nothing was stored", clip(typ), clip(id))
	if expected != nil {
		msg = fmt.Sprintf("aggregate %s/%s is not at version %d (expectedVersion), or the events mix stored and new event ids; nothing was stored",
			clip(typ), clip(id), *expected)
	}
	return &apiError{kind: eventstore.ErrConflict, msg: msg}
}
