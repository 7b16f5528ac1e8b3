package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
)

// route is the handler of one method of a path.
type route struct {
	method string
	fn     http.HandlerFunc
}

// methods dispatches on the request method; other methods get a JSON 405
// with an Allow header listing the methods in the order given.
func (h *handler) methods(routes ...route) http.HandlerFunc {
	allow := make([]string, len(routes))
	for i, rt := range routes {
		allow[i] = rt.method
	}
	allowed := strings.Join(allow, ", ")
	return func(w http.ResponseWriter, r *http.Request) {
		var fn http.HandlerFunc
		for _, rt := range routes {
			if rt.method == r.Method {
				fn = rt.fn
			}
		}
		if fn == nil {
			w.Header().Set("Allow", allowed)
			hint := ""
			if r.Pattern == patAggregate && r.Method == http.MethodPost {
				hint = "; events are saved with POST " + clip(r.URL.Path) + "/events"
			}
			h.fail(w, r, apiErr(errMethod, "method %s is not allowed on %s; allowed: %s%s", clip(r.Method), clip(r.URL.Path), allowed, hint))
			return
		}
		fn(w, r)
	}
}

// exists serves HEAD /aggregates/{type}/{id}: 200 or 404, no body.
func (h *handler) exists(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "type", "id")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ok, err := h.store(r).Exists(r.Context(), seg[0], seg[1])
	switch {
	case err != nil:
		h.fail(w, r, err)
	case !ok:
		h.fail(w, r, fmt.Errorf("aggregate %s/%s: %w", seg[0], seg[1], eventstore.ErrNotFound))
	default:
		w.WriteHeader(http.StatusOK)
	}
}

// saveBulk serves POST /aggregates/{type}/events: several aggregates'
// batches saved atomically, or the older single-batch form.
func (h *handler) saveBulk(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "type")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	body, err := h.readJSON(w, r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	batches, err := decodeBulk(body)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	res, err := h.store(r).SaveAll(r.Context(), seg[0], batches)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	stored, events := 0, 0
	for i, b := range batches {
		if i < len(res) && !res[i].Duplicate {
			stored++
			events += len(b.Events)
		}
	}
	h.saves.add(time.Now(), stored, events)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// deleteAggregate serves DELETE /aggregates/{type}/{id}: without
// deleteToken it answers a token for that aggregate; with it, deletes.
func (h *handler) deleteAggregate(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "type", "id")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.twoStepDelete(w, r, aggregateScope(seg[0], seg[1]),
		func() error {
			ok, err := h.store(r).Exists(r.Context(), seg[0], seg[1])
			if err == nil && !ok {
				err = fmt.Errorf("aggregate %s/%s: %w", seg[0], seg[1], eventstore.ErrNotFound)
			}
			return err
		},
		func() error {
			if err := h.store(r).DeleteAggregate(r.Context(), seg[0], seg[1]); err != nil {
				return err
			}
			return h.forgetReactions(r, seg[0], seg[1])
		})
}

// deleteType serves DELETE /aggregates/{type}, as deleteAggregate does
// for every aggregate of the type.
func (h *handler) deleteType(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "type")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.twoStepDelete(w, r, typeScope(seg[0]),
		func() error {
			_, err := h.store(r).FeedHead(r.Context(), seg[0])
			return err
		},
		func() error {
			if err := h.store(r).DeleteAggregateType(r.Context(), seg[0]); err != nil {
				return err
			}
			return h.forgetReactions(r, seg[0], "")
		})
}

type tokenJSON struct {
	DeleteToken string `json:"deleteToken"`
}

// twoStepDelete answers 200 with a token for scope when the request has
// no deleteToken (after exists found the target), or checks the token
// (403 when wrong, expired or for another scope) and deletes: 204.
func (h *handler) twoStepDelete(w http.ResponseWriter, r *http.Request, scope string, exists, del func() error) {
	q, err := parseQuery(r, "deleteToken")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	// A token is for one tenant's data: it deletes nothing of another.
	scope = "tenant\x00" + tenantOf(r) + "\x00" + scope
	if !q.has("deleteToken") {
		if err := exists(); err != nil {
			h.fail(w, r, err)
			return
		}
		h.sendValue(w, r, tokenJSON{DeleteToken: h.tokens.issue(scope)})
		return
	}
	if !h.tokens.valid(scope, q.v.Get("deleteToken")) {
		h.fail(w, r, apiErr(errForbidden, "the deleteToken is wrong, expired or for something else; request a new one without deleteToken"))
		return
	}
	if err := del(); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// aggregateSummaryJSON is one aggregate of GET /aggregates/{type}.
type aggregateSummaryJSON struct {
	AggregateID      string `json:"aggregateId"`
	AggregateVersion int64  `json:"aggregateVersion"`
	// CreatedAt and UpdatedAt are the times of the aggregate's first and
	// last saves, in milliseconds since the Unix epoch.
	CreatedAt int64 `json:"createdAt"`
	UpdatedAt int64 `json:"updatedAt"`
}

// listAggregates serves GET /aggregates/{type}?skip=&limit=: a page of the
// type's aggregates by id, 404 when the type has none.
func (h *handler) listAggregates(w http.ResponseWriter, r *http.Request) {
	seg, err := segments(r, "type")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q, err := parseQuery(r, "skip", "limit")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := q.only("skip", "limit"); err != nil {
		h.fail(w, r, err)
		return
	}
	skip, err := q.int("skip", 0, 0, maxAggregateSkip)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	limit, err := q.int("limit", limits.DefaultListLimit, 1, limits.MaxListLimit)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	page, err := h.store(r).Aggregates(r.Context(), seg[0], &eventstore.AggregateListOptions{Skip: int(skip), Limit: int(limit)})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := make([]aggregateSummaryJSON, len(page.Aggregates))
	for i, a := range page.Aggregates {
		out[i] = aggregateSummaryJSON{AggregateID: a.ID, AggregateVersion: a.Version,
			CreatedAt: a.CreatedAt.UnixMilli(), UpdatedAt: a.UpdatedAt.UnixMilli()}
	}
	h.sendValue(w, r, struct {
		Aggregates []aggregateSummaryJSON `json:"aggregates"`
		HasMore    bool                   `json:"hasMore"`
		TotalCount int64                  `json:"totalCount"`
	}{out, page.HasMore, page.Total})
}
