package httpapi

import (
	"cmp"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
)

// aggregatedEntry is one aggregated projection's result, as
// listAggregated sorts it.
type aggregatedEntry struct {
	name             string
	created, updated int64
}

// listAggregated serves GET /projections/aggregated, the service's older
// list of the aggregated projections' results (which the official Go
// client's ListAggregatedProjections reads):
//
//	{"projections": [{"projectionId": "<name>", "createdAt", "updatedAt", "data"}],
//	 "hasMore": false, "totalCount": 1}
//
// sorted by sort (projectionId, the default, createdAt or updatedAt, with
// an optional + or - prefix), paged by skip and limit as the list of a
// single projection's instances is. An aggregated projection without a
// result (no event it handles processed yet) is not listed.
func (h *handler) listAggregated(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "skip", "limit", "sort")
	if err == nil {
		err = q.only("skip", "limit", "sort")
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	skip, err := q.int("skip", 0, 0, 1<<30)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit, err := q.int("limit", limits.DefaultListLimit, 1, limits.MaxListLimit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	by, desc := eventstore.SortByID, false
	if q.has("sort") {
		var ok bool
		if by, desc, ok = parseSort(q.v["sort"][0]); !ok || by == eventstore.SortByReference {
			h.fail(w, r, &queryError{"sort", "must be projectionId, createdAt or updatedAt, with an optional + or - prefix"})
			return
		}
	}
	pr := h.proj(r)
	defs, err := pr.Definitions(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// The results' times, without their data (a page's data is read
	// again below, so that the list holds one page of data at most).
	var all []aggregatedEntry
	for _, d := range defs {
		if !d.Aggregated {
			continue
		}
		p, err := pr.Aggregated(r.Context(), d.Name)
		switch {
		case errors.Is(err, eventstore.ErrNotFound):
			continue // no result yet, or deleted meanwhile
		case err != nil:
			h.fail(w, r, err)
			return
		}
		all = append(all, aggregatedEntry{name: d.Name, created: p.CreatedAt.UnixMilli(), updated: p.UpdatedAt.UnixMilli()})
	}
	slices.SortFunc(all, func(a, b aggregatedEntry) int {
		c := 0
		switch by {
		case eventstore.SortByCreatedAt:
			c = cmp.Compare(a.created, b.created)
		case eventstore.SortByUpdatedAt:
			c = cmp.Compare(a.updated, b.updated)
		}
		c = cmp.Or(c, strings.Compare(a.name, b.name))
		if desc {
			return -c
		}
		return c
	})
	total := len(all)
	page := all[min(int(skip), total):min(int(skip+limit), total)]
	out := make([]instanceJSON, 0, len(page))
	for _, e := range page {
		p, err := pr.Aggregated(r.Context(), e.name)
		switch {
		case errors.Is(err, eventstore.ErrNotFound):
			continue // deleted since
		case err != nil:
			h.fail(w, r, err)
			return
		}
		out = append(out, toInstanceJSON(p))
	}
	h.sendValue(w, r, struct {
		Projections []instanceJSON `json:"projections"`
		HasMore     bool           `json:"hasMore"`
		TotalCount  int            `json:"totalCount"`
	}{out, int(skip)+len(page) < total, total})
}
