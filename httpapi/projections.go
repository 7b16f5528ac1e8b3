package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/safetext"
)

// intParam reads an integer query parameter within [lo, hi], or def when
// it is absent.
func intParam(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	q, err := parseQuery(r, name)
	if err != nil {
		return 0, err
	}
	return q.int(name, def, lo, hi)
}

// listDefinitions serves GET /projections/definitions?skip=&limit=.
func (h *handler) listDefinitions(w http.ResponseWriter, r *http.Request) {
	skip, err := intParam(r, "skip", 0, 0, 1<<30)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit, err := intParam(r, "limit", limits.DefaultListLimit, 1, limits.MaxListLimit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defs, err := h.proj(r).Definitions(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	total := len(defs)
	page := defs[min(int(skip), total):min(int(skip+limit), total)]
	h.sendValue(w, r, struct {
		Definitions []eventstore.Definition `json:"definitions"`
		HasMore     bool                    `json:"hasMore"`
		TotalCount  int                     `json:"totalCount"`
	}{page, int(skip)+len(page) < total, total})
}

// getDefinition serves GET /projections/definitions/{name}.
func (h *handler) getDefinition(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "name")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	d, err := h.proj(r).Definition(r.Context(), seg[0])
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.sendValue(w, r, d)
}

// putDefinition serves PUT /projections/definitions/{name}: create or
// replace.
func (h *handler) putDefinition(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "name")
	if err != nil {
		h.fail(w, r, err)
		return
	}
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
	if d.Name == "" {
		d.Name = seg[0]
	}
	if d.Name != seg[0] {
		h.fail(w, r, &queryError{"projectionName", fmt.Sprintf("%q in the body differs from %q in the path", clip(d.Name), clip(seg[0]))})
		return
	}
	if _, err := h.proj(r).Put(r.Context(), d); err != nil {
		h.fail(w, r, h.codeConflict(r, d.Name, err))
		return
	}
	if err := h.definitionChanged(r, d.Name, false); err != nil {
		h.fail(w, r, err)
		return
	}
	h.sendValue(w, r, d)
}

// codeConflict returns err, or the API's own error when err is a conflict
// with the projection in Go of that name.
func (h *handler) codeConflict(r *http.Request, name string, err error) error {
	if !errors.Is(err, eventstore.ErrConflict) {
		return err
	}
	if d, derr := h.proj(r).Definition(r.Context(), name); derr == nil && d.Code != nil {
		return codeProjectionError(name)
	}
	return err
}

// codeProjectionError refuses a change to the projection in Go name.
func codeProjectionError(name string) error {
	return apiErr(eventstore.ErrConflict, "projection %q is written in Go (registered by the application, version in \"code\"); "+
		"it cannot be replaced or deleted over the API: choose another name for a definition", clip(name))
}

// deleteDefinition serves DELETE /projections/definitions/{name}.
func (h *handler) deleteDefinition(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "name")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// A projection written in Go is deleted from Go only: its
	// processes would otherwise go on without their projection.
	if d, err := h.proj(r).Definition(r.Context(), seg[0]); err == nil && d.Code != nil {
		h.fail(w, r, codeProjectionError(seg[0]))
		return
	}
	if err := h.proj(r).Delete(r.Context(), seg[0]); err != nil {
		h.fail(w, r, h.codeConflict(r, seg[0], err))
		return
	}
	if err := h.definitionChanged(r, seg[0], false); err != nil {
		h.fail(w, r, err)
		return
	}
	h.send(w, r, nil, false)
}

// resetProjection serves DELETE /projections/single/{name} and
// /projections/aggregated/{name}: drop every instance and rebuild.
func (h *handler) resetProjection(aggregated bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		seg, err := segments(r, "name")
		if err != nil {
			h.fail(w, r, err)
			return
		}
		d, err := h.proj(r).Definition(r.Context(), seg[0])
		if err == nil && d.Aggregated != aggregated {
			err = h.projectionNotFound(r.Context(), seg[0], "", aggregated, eventstore.ErrNotFound)
		}
		if err == nil {
			err = h.proj(r).Reset(r.Context(), seg[0])
		}
		if err == nil && tenantOf(r) == "" {
			err = h.definitionChanged(r, seg[0], true)
		}
		if err != nil {
			h.fail(w, r, err)
			return
		}
		h.send(w, r, nil, false)
	}
}

// overviewEntry is one projection in GET /projections.
type overviewEntry struct {
	ProjectionName    string                       `json:"projectionName"`
	FeedName          string                       `json:"feedName,omitempty"`
	Aggregated        bool                         `json:"aggregated"`
	ProjectionsCount  int64                        `json:"projectionsCount"`
	Checkpoint        int64                        `json:"checkpoint"`
	Head              int64                        `json:"head"`
	Behind            int64                        `json:"behind"`
	Rebuilding        bool                         `json:"rebuilding"`
	RebuildCheckpoint int64                        `json:"rebuildCheckpoint,omitempty"`
	RebuildReason     string                       `json:"rebuildReason,omitempty"`
	Errors            []eventstore.ProjectionError `json:"errors"`
}

// overview serves GET /projections.
func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	all, err := h.proj(r).Statuses(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := make([]overviewEntry, len(all))
	for i, s := range all {
		errs := s.Errors
		if errs == nil {
			errs = []eventstore.ProjectionError{}
		}
		out[i] = overviewEntry{
			ProjectionName: s.Definition.Name, FeedName: s.Definition.Feed, Aggregated: s.Definition.Aggregated,
			ProjectionsCount: s.Instances, Checkpoint: s.Checkpoint, Head: s.Head, Behind: s.Behind,
			Rebuilding: s.Rebuilding, RebuildCheckpoint: s.RebuildCheckpoint, RebuildReason: s.RebuildReason, Errors: errs,
		}
	}
	h.sendValue(w, r, struct {
		Projections []overviewEntry `json:"projections"`
	}{out})
}

// instanceJSON is a projection instance in a list.
type instanceJSON struct {
	ProjectionID string          `json:"projectionId"`
	CreatedAt    int64           `json:"createdAt"`
	UpdatedAt    int64           `json:"updatedAt"`
	Reference    *string         `json:"reference,omitempty"`
	Data         rawJSONOrObject `json:"data"`
}

// rawJSONOrObject is instance data, {} when empty.
type rawJSONOrObject []byte

// MarshalJSON implements json.Marshaler.
func (d rawJSONOrObject) MarshalJSON() ([]byte, error) {
	if len(d) == 0 {
		return []byte("{}"), nil
	}
	return d, nil
}

func toInstanceJSON(p eventstore.Projection) instanceJSON {
	out := instanceJSON{ProjectionID: p.ID, CreatedAt: p.CreatedAt.UnixMilli(), UpdatedAt: p.UpdatedAt.UnixMilli(), Data: rawJSONOrObject(p.Data)}
	if p.Reference.Kind != eventstore.RefNone {
		ref := p.Reference.Text
		out.Reference = &ref
	}
	return out
}

// listSingle serves GET /projections/single/{name}.
func (h *handler) listSingle(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "name")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var opts eventstore.ListOptions
	skip, err := intParam(r, "skip", 0, 0, 1<<30)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit, err := intParam(r, "limit", limits.DefaultListLimit, 1, limits.MaxListLimit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	opts.Skip, opts.Limit = int(skip), int(limit)
	q := r.URL.Query()
	if s := q.Get("sort"); s != "" {
		var ok bool
		if opts.Sort, opts.Descending, ok = parseSort(s); !ok {
			h.fail(w, r, &queryError{"sort", "must be projectionId, reference, createdAt or updatedAt, with an optional + or - prefix"})
			return
		}
	}
	for name, dst := range map[string]*eventstore.Reference{"reference": &opts.Reference, "from": &opts.RefFrom, "to": &opts.RefTo} {
		if q.Has(name) {
			*dst = eventstore.ParseReference(q.Get(name))
		}
	}
	opts.IDs = q["id"]
	if len(opts.IDs) > limits.MaxListLimit {
		h.fail(w, r, &queryError{"id", fmt.Sprintf("may be given at most %d times", limits.MaxListLimit)})
		return
	}
	if opts.Search, err = searchParam(r); err != nil {
		h.fail(w, r, err)
		return
	}
	page, err := h.proj(r).List(r.Context(), seg[0], opts)
	if err != nil {
		h.fail(w, r, searchError(err))
		return
	}
	out := make([]instanceJSON, len(page.Projections))
	for i, p := range page.Projections {
		out[i] = toInstanceJSON(p)
	}
	h.sendValue(w, r, struct {
		Projections []instanceJSON `json:"projections"`
		HasMore     bool           `json:"hasMore"`
		TotalCount  int64          `json:"totalCount"`
	}{out, page.HasMore, page.Total})
}

// searchParam returns the search parameter: "" when absent, a 400 when
// given twice.
func searchParam(r *http.Request) (string, error) {
	v := r.URL.Query()["search"]
	switch len(v) {
	case 0:
		return "", nil
	case 1:
		if v[0] == "" {
			return "", &queryError{"search", "must not be empty"}
		}
		return v[0], nil
	}
	return "", &queryError{"search", "is given more than once"}
}

// searchError makes the library's refusal of a search (too long, too
// many words, no word, a projection without indexedFields) a 400 naming
// the parameter, as for the other query parameters; other errors pass.
func searchError(err error) error {
	var ve *eventstore.ValidationError
	if errors.As(err, &ve) && len(ve.Fields) == 1 && ve.Fields[0].Field == "search" {
		return &queryError{"search", ve.Fields[0].Message}
	}
	return err
}

// countSingle serves GET /projections/single/{name}/_count.
func (h *handler) countSingle(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "name")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var ref eventstore.Reference
	if q := r.URL.Query(); q.Has("reference") {
		ref = eventstore.ParseReference(q.Get("reference"))
	}
	search, err := searchParam(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var n int64
	if search == "" {
		n, err = h.proj(r).Count(r.Context(), seg[0], ref)
	} else {
		// The total of a one-instance page counts every match.
		var page eventstore.ProjectionPage
		page, err = h.proj(r).List(r.Context(), seg[0], eventstore.ListOptions{Reference: ref, Search: search, Limit: 1})
		n = page.Total
	}
	if err != nil {
		h.fail(w, r, searchError(err))
		return
	}
	h.sendValue(w, r, struct {
		Count int64 `json:"count"`
	}{n})
}

// maxAwaitCreation bounds awaitCreation, in milliseconds.
const maxAwaitCreation = 60_000

// querySingle serves GET /projections/single/{name}/{id}, waiting up to
// awaitCreation milliseconds for the instance to appear.
func (h *handler) querySingle(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "name", "id")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	wait, err := intParam(r, "awaitCreation", 0, 1, maxAwaitCreation)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var p eventstore.Projection
	if wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(wait)*time.Millisecond)
		p, err = h.proj(r).AwaitSingle(ctx, seg[0], seg[1])
		cancel()
		if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
			err = apiErr(eventstore.ErrNotFound, "projection %q has no instance %q after %d ms", clip(seg[0]), clip(seg[1]), wait)
		}
	} else {
		p, err = h.proj(r).Single(r.Context(), seg[0], seg[1])
	}
	if err != nil {
		err = h.projectionNotFound(r.Context(), seg[0], seg[1], false, err)
		h.fail(w, r, err)
		return
	}
	h.sendProjection(w, r, p)
}

// projectionNotFound says why a projection query found nothing: no such
// definition, a definition of the other kind, or no instance (yet). Other
// errors are returned as they are.
func (h *handler) projectionNotFound(ctx context.Context, name, id string, aggregated bool, err error) error {
	if !errors.Is(err, eventstore.ErrNotFound) {
		return err
	}
	d, derr := h.projCtx(ctx).Definition(ctx, name)
	switch {
	case errors.Is(derr, eventstore.ErrNotFound):
		return apiErr(eventstore.ErrNotFound, "projection %q was not found: no definition of that name", clip(name))
	case derr != nil:
		return derr
	case d.Aggregated && !aggregated:
		return apiErr(eventstore.ErrNotFound, "projection %q is aggregated: use /projections/aggregated/%s", clip(name), clip(name))
	case !d.Aggregated && aggregated:
		return apiErr(eventstore.ErrNotFound, "projection %q is a single projection: use /projections/single/%s", clip(name), clip(name))
	}
	if e, ok := h.recordedError(ctx, name, id, aggregated); ok {
		what := fmt.Sprintf("projection %q has no instance %q", clip(name), clip(id))
		if aggregated {
			what = fmt.Sprintf("aggregated projection %q has no result yet", clip(name))
		}
		return apiErr(eventstore.ErrNotFound, "%s: event %s (%s) could not be applied: %s; GET /projections lists the recorded errors",
			what, clip(e.EventID), clip(e.EventType), safetext.Clip(e.Message, 256))
	}
	if aggregated {
		return apiErr(eventstore.ErrNotFound, "aggregated projection %q has no result yet: no event it handles has been processed", clip(name))
	}
	return apiErr(eventstore.ErrNotFound, "projection %q has no instance %q: no event it handles has been processed for that id", clip(name), clip(id))
}

// recordedError returns the latest recorded error of projection name for
// instance id (any instance of an aggregated projection), if any.
func (h *handler) recordedError(ctx context.Context, name, id string, aggregated bool) (eventstore.ProjectionError, bool) {
	st, err := h.projCtx(ctx).Status(ctx, name)
	if err != nil {
		return eventstore.ProjectionError{}, false
	}
	for i := len(st.Errors) - 1; i >= 0; i-- {
		if e := st.Errors[i]; aggregated || e.InstanceID == id {
			return e, true
		}
	}
	return eventstore.ProjectionError{}, false
}

// parseSort reads the sort parameter: projectionId, reference, createdAt
// or updatedAt, optionally prefixed by '+' (ascending) or '-'.
func parseSort(s string) (sort eventstore.ProjectionSort, desc, ok bool) {
	switch {
	case strings.HasPrefix(s, "-"):
		desc, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	switch s {
	case "projectionId", "":
		return eventstore.SortByID, desc, true
	case "reference":
		return eventstore.SortByReference, desc, true
	case "createdAt":
		return eventstore.SortByCreatedAt, desc, true
	case "updatedAt":
		return eventstore.SortByUpdatedAt, desc, true
	}
	return 0, false, false
}
