package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
)

// maxReactionDefinitionBytes bounds the body of a reaction definition.
const maxReactionDefinitionBytes = 64 << 10

// TenantReactions is implemented by Tenants whose tenants have reactions
// of their own (a *tenancy.Set with Options.Reactions). With it, the
// reactions API (GET /reactions, DELETE /reactions/{id}, POST
// /reactions/{id}/execute) serves the tenant a request names, and the
// handler passes changes of reaction definitions on to the tenants; the
// definitions themselves are shared, as projection definitions are.
// Without it, a tenant header on the reactions API is answered with 400.
type TenantReactions interface {
	// OpenReactions returns the reactions Engine of tenant id, with
	// release, which the handler calls once the request is served.
	OpenReactions(ctx context.Context, id string) (*reactions.Engine, func(), error)
	// ReactionDefinitionsChanged is called after a reaction definition
	// was created, replaced or deleted in Options.Reactions.
	ReactionDefinitionsChanged(ctx context.Context) error
}

// reactionsOf returns the Engine that serves r, or an error: the
// project's, or its tenant's when the Tenants have reactions
// (TenantReactions).
func (h *handler) reactionsOf(r *http.Request) (*reactions.Engine, error) {
	if h.reactions == nil {
		return nil, apiErr(eventstore.ErrNotFound, "reactions are not enabled on this server")
	}
	if d, ok := r.Context().Value(dataKey{}).(*tenantData); ok {
		if d.r == nil {
			return nil, apiErr(errUnsupported, "reactions are not supported per tenant: send the request without the tenant header")
		}
		return d.r, nil
	}
	return h.reactions, nil
}

// reactionDefinitionsChanged passes a change of the reaction definitions
// on to the tenants, when they have reactions. A failure is logged, not
// answered: the change is made, and tenants get it within a second anyway
// (package tenancy looks for changes once a second).
func (h *handler) reactionDefinitionsChanged(r *http.Request) {
	tr, ok := h.tenants.(TenantReactions)
	if !ok {
		return
	}
	if err := tr.ReactionDefinitionsChanged(r.Context()); err != nil {
		h.log.Warn("httpapi: passing a reaction definition on to the tenants failed; they get it within a second", "err", err)
	}
}

// decodeReactionDefinition decodes a reaction definition strictly: bad
// JSON is 400, an unknown field or a field of the wrong type 422 naming it.
func decodeReactionDefinition(body []byte) (reactions.Definition, error) {
	var d reactions.Definition
	if len(body) > maxReactionDefinitionBytes {
		return d, &http.MaxBytesError{Limit: maxReactionDefinitionBytes}
	}
	if !json.Valid(body) {
		return d, apiErr(errMalformed, "the body is not valid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&d)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		if _, err := dec.Token(); err != io.EOF {
			return d, apiErr(errMalformed, "the body holds more than one JSON value")
		}
		return d, nil
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(body)"
		}
		return d, &apiError{kind: eventstore.ErrInvalid, msg: field + " has the wrong JSON type",
			fields: []eventstore.FieldError{{Field: field, Message: "must be a JSON " + jsonKind(te.Type.Kind().String())}}}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return d, &apiError{kind: eventstore.ErrInvalid, msg: "unknown field " + clip(name),
			fields: []eventstore.FieldError{{Field: clip(name), Message: "is not a field of a reaction definition"}}}
	}
	return d, apiErr(errMalformed, "the body is not a reaction definition object")
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "slice":
		return "array"
	case "map", "struct":
		return "object"
	}
	return "value of another type"
}

// redacted returns d without its signing secret, as it is shown.
func redacted(d reactions.Definition) reactions.Definition {
	d.Action.SigningSecret = ""
	return d
}

// reactionDefinitionBody reads and decodes the body of a definition.
func (h *handler) reactionDefinitionBody(w http.ResponseWriter, r *http.Request) (reactions.Definition, error) {
	body, err := h.readJSON(w, r)
	if err != nil {
		return reactions.Definition{}, err
	}
	return decodeReactionDefinition(body)
}

// createReactionDefinition serves POST /reactions/definitions.
func (h *handler) createReactionDefinition(w http.ResponseWriter, r *http.Request) {
	d, err := h.reactionDefinitionBody(w, r)
	var e *reactions.Engine
	if err == nil {
		e, err = h.reactionsOf(r)
	}
	if err == nil {
		err = e.Create(r.Context(), d)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.reactionDefinitionsChanged(r)
	h.sendValue(w, r, redacted(d))
}

// putReactionDefinition serves PUT /reactions/definitions/{name}.
func (h *handler) putReactionDefinition(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "name")
	var d reactions.Definition
	if err == nil {
		d, err = h.reactionDefinitionBody(w, r)
	}
	var e *reactions.Engine
	if err == nil {
		e, err = h.reactionsOf(r)
	}
	if err == nil && d.Name == "" {
		d.Name = seg[0]
	}
	if err == nil && d.Name != seg[0] {
		err = &queryError{"reactionName", fmt.Sprintf("%q in the body differs from %q in the path", clip(d.Name), clip(seg[0]))}
	}
	if err == nil {
		_, err = e.Put(r.Context(), d)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.reactionDefinitionsChanged(r)
	h.sendValue(w, r, redacted(d))
}

// getReactionDefinition serves GET /reactions/definitions/{name}.
func (h *handler) getReactionDefinition(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "name")
	var e *reactions.Engine
	if err == nil {
		e, err = h.reactionsOf(r)
	}
	var d reactions.Definition
	if err == nil {
		d, err = e.Definition(r.Context(), seg[0])
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.sendValue(w, r, redacted(d))
}

// deleteReactionDefinition serves DELETE /reactions/definitions/{name}.
func (h *handler) deleteReactionDefinition(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "name")
	var e *reactions.Engine
	if err == nil {
		e, err = h.reactionsOf(r)
	}
	if err == nil {
		err = e.Delete(r.Context(), seg[0])
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.reactionDefinitionsChanged(r)
	h.send(w, r, nil, false)
}

// listReactionDefinitions serves GET /reactions/definitions?skip&limit.
func (h *handler) listReactionDefinitions(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "skip", "limit")
	if err == nil {
		err = q.only("skip", "limit")
	}
	var skip, limit int64
	if err == nil {
		skip, err = q.int("skip", 0, 0, 1<<30)
	}
	if err == nil {
		limit, err = q.int("limit", reactions.DefaultLimit, 0, reactions.MaxLimit)
	}
	var e *reactions.Engine
	if err == nil {
		e, err = h.reactionsOf(r)
	}
	var defs []reactions.Definition
	if err == nil {
		defs, err = e.Definitions(r.Context())
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	total := len(defs)
	page := defs[min(int(skip), total):min(int(skip+limit), total)]
	for i := range page {
		page[i] = redacted(page[i])
	}
	h.sendValue(w, r, struct {
		Definitions []reactions.Definition `json:"definitions"`
		HasMore     bool                   `json:"hasMore"`
		TotalCount  int                    `json:"totalCount"`
	}{page, int(skip)+len(page) < total, total})
}

// reactionJSON is a reaction as the API shows it; times are milliseconds
// since the epoch, finishedAt null while the reaction is active.
type reactionJSON struct {
	ReactionID    string `json:"reactionId"`
	ReactionName  string `json:"reactionName"`
	AggregateType string `json:"aggregateType"`
	AggregateID   string `json:"aggregateId"`
	EventID       string `json:"eventId"`
	EventType     string `json:"eventType"`
	CreatedAt     int64  `json:"createdAt"`
	TriggerAt     int64  `json:"triggerAt"`
	FinishedAt    *int64 `json:"finishedAt"`
	Status        string `json:"status"`
	Attempts      int    `json:"attempts"`
	LastError     string `json:"lastError,omitempty"`
}

func toReactionJSON(x reactions.Reaction) reactionJSON {
	out := reactionJSON{ReactionID: x.ID, ReactionName: x.Name, AggregateType: x.AggregateType, AggregateID: x.AggregateID,
		EventID: x.EventID, EventType: x.EventType, CreatedAt: x.CreatedAt.UnixMilli(), TriggerAt: x.TriggerAt.UnixMilli(),
		Status: string(x.Status), Attempts: x.Attempts, LastError: x.LastError}
	if !x.FinishedAt.IsZero() {
		ms := x.FinishedAt.UnixMilli()
		out.FinishedAt = &ms
	}
	return out
}

// listReactions serves GET /reactions?status&skip&limit&aggregateId&eventId&from&to&reactionName.
func (h *handler) listReactions(w http.ResponseWriter, r *http.Request) {
	names := []string{"status", "skip", "limit", "aggregateId", "eventId", "from", "to", "reactionName"}
	q, err := parseQuery(r, names...)
	if err == nil {
		err = q.only(names...)
	}
	var opts reactions.ListOptions
	var skip, limit int64
	if err == nil {
		skip, err = q.int("skip", 0, 0, reactions.MaxSkip)
	}
	if err == nil {
		limit, err = q.int("limit", reactions.DefaultLimit, 0, reactions.MaxLimit)
	}
	if err == nil {
		opts.From, err = q.time("from", false)
	}
	if err == nil {
		opts.To, err = q.time("to", true)
	}
	if err == nil {
		opts.Skip, opts.Limit = int(skip), int(limit)
		opts.Status = reactions.Status(strings.ToUpper(q.v.Get("status")))
		opts.AggregateID, opts.EventID, opts.Name = q.v.Get("aggregateId"), q.v.Get("eventId"), q.v.Get("reactionName")
		for _, v := range []string{opts.AggregateID, opts.EventID, opts.Name} {
			if len(v) > 256 {
				err = &queryError{"aggregateId", "aggregateId, eventId and reactionName are at most 256 bytes"}
			}
		}
	}
	if err == nil && limit == 0 {
		opts.Limit = -1 // only the count
	}
	var e *reactions.Engine
	if err == nil {
		e, err = h.reactionsOf(r)
	}
	var p reactions.Page
	if err == nil {
		p, err = e.Reactions(r.Context(), opts)
	}
	if err != nil {
		var ve *eventstore.ValidationError
		if errors.As(err, &ve) && len(ve.Fields) > 0 {
			err = &queryError{ve.Fields[0].Field, ve.Fields[0].Message}
		}
		h.fail(w, r, err)
		return
	}
	out := make([]reactionJSON, 0, len(p.Reactions))
	for _, x := range p.Reactions {
		out = append(out, toReactionJSON(x))
	}
	h.sendValue(w, r, struct {
		Reactions  []reactionJSON `json:"reactions"`
		HasMore    bool           `json:"hasMore"`
		TotalCount int64          `json:"totalCount"`
	}{out, p.HasMore, p.Total})
}

// reactionID returns the reaction id of the path.
func reactionID(r *http.Request) (string, error) {
	seg, err := segments(r, "reactionId")
	if err != nil {
		return "", err
	}
	return seg[0], nil
}

// getReaction serves GET /reactions/{reactionId}.
func (h *handler) getReaction(w http.ResponseWriter, r *http.Request) {
	id, err := reactionID(r)
	var e *reactions.Engine
	if err == nil {
		e, err = h.reactionsOf(r)
	}
	var x reactions.Reaction
	if err == nil {
		x, err = e.Reaction(r.Context(), id)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.sendValue(w, r, toReactionJSON(x))
}

// deleteReaction serves DELETE /reactions/{reactionId}: cancel a pending
// reaction.
func (h *handler) deleteReaction(w http.ResponseWriter, r *http.Request) {
	id, err := reactionID(r)
	var e *reactions.Engine
	if err == nil {
		e, err = h.reactionsOf(r)
	}
	if err == nil {
		err = e.Cancel(r.Context(), id)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.send(w, r, nil, false)
}

// executeReaction serves POST /reactions/{reactionId}/execute.
func (h *handler) executeReaction(w http.ResponseWriter, r *http.Request) {
	if a := r.PathValue("action"); a != "" && a != "execute" {
		h.fail(w, r, apiErr(eventstore.ErrNotFound, "no endpoint at %s", clip(r.URL.Path)))
		return
	}
	id, err := reactionID(r)
	var e *reactions.Engine
	if err == nil {
		e, err = h.reactionsOf(r)
	}
	if err == nil {
		err = e.Execute(r.Context(), id)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.send(w, r, nil, false)
}

// forgetReactions removes the reactions of deleted events, after a
// deletion in the data space r is served with (the project's, or its
// tenant's when the tenants have reactions).
func (h *handler) forgetReactions(r *http.Request, aggregateType, aggregateID string) error {
	e, err := h.reactionsOf(r)
	if err != nil {
		return nil // no reactions here
	}
	return e.ForgetAggregate(r.Context(), aggregateType, aggregateID)
}

// muxPattern is the pattern pattern is registered with. The mux would
// refuse /reactions/{reactionId}/execute beside
// /reactions/definitions/{name} (neither is more specific), so it is
// registered as /reactions/{reactionId}/{action}, whose handler answers
// 404 for any action but execute.
func muxPattern(pattern string) string {
	if pattern == patReactionExecute {
		return "/reactions/{reactionId}/{action}"
	}
	return pattern
}
