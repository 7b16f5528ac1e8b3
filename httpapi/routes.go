package httpapi

import "net/http"

// The patterns of the endpoints, as registered on the mux; a request's
// Pattern is one of them, which the error messages use to name what was
// not found.
const (
	patAggregateEvents = "/aggregates/{type}/{id}/events"
	patAggregate       = "/aggregates/{type}/{id}"
	patTypeEvents      = "/aggregates/{type}/events"
	patType            = "/aggregates/{type}"
	patFeeds           = "/feeds"
	patFeed            = "/feeds/{type}"
	patProjections     = "/projections"
	patDefinitions     = "/projections/definitions"
	patDefinition      = "/projections/definitions/{name}"
	patSingleList      = "/projections/single/{name}"
	patSingleCount     = "/projections/single/{name}/_count"
	patSingle          = "/projections/single/{name}/{id}"
	patAggregated      = "/projections/aggregated/{name}"
	patAggregatedList  = "/projections/aggregated"
	patOpenAPI         = "/openapi.json"
	patStatus          = "/status"
	patTenants         = "/tenants"
	patTenant          = "/tenants/{tenantId}"
	patReactionDefs    = "/reactions/definitions"
	patReactionDef     = "/reactions/definitions/{name}"
	patReactions       = "/reactions"
	patReaction        = "/reactions/{reactionId}"
	patReactionExecute = "/reactions/{reactionId}/execute"
)

// pathRoutes is one path pattern and the methods it serves.
type pathRoutes struct {
	pattern string
	methods []route
}

// routes lists every endpoint: the mux is built from it, and the tests
// compare it with the OpenAPI document.
func (h *handler) routes() []pathRoutes {
	asAggregate := func(fn http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			r.SetPathValue("id", "events")
			fn(w, r)
		}
	}
	return []pathRoutes{
		{patAggregateEvents, []route{{http.MethodPost, h.save}}},
		{patAggregate, []route{{http.MethodGet, h.load}, {http.MethodHead, h.exists}, {http.MethodDelete, h.deleteAggregate}}},
		// The bulk save, and, for the other methods, the aggregate whose id
		// is "events".
		{patTypeEvents, []route{{http.MethodPost, h.saveBulk}, {http.MethodGet, asAggregate(h.load)},
			{http.MethodHead, asAggregate(h.exists)}, {http.MethodDelete, asAggregate(h.deleteAggregate)}}},
		{patType, []route{{http.MethodGet, h.listAggregates}, {http.MethodHead, h.listAggregates}, {http.MethodDelete, h.deleteType}}},
		{patFeeds, []route{{http.MethodGet, h.feeds}, {http.MethodHead, h.feeds}}},
		{patFeed, []route{{http.MethodGet, h.feed}, {http.MethodHead, h.feedHead}}},
		{patProjections, []route{{http.MethodGet, h.overview}, {http.MethodHead, h.overview}}},
		{patDefinitions, []route{{http.MethodGet, h.listDefinitions}, {http.MethodHead, h.listDefinitions}, {http.MethodPost, h.createDefinition}}},
		{patDefinition, []route{{http.MethodGet, h.getDefinition}, {http.MethodHead, h.getDefinition},
			{http.MethodPut, h.putDefinition}, {http.MethodDelete, h.deleteDefinition}}},
		{patSingleList, []route{{http.MethodGet, h.listSingle}, {http.MethodHead, h.listSingle}, {http.MethodDelete, h.resetProjection(false)}}},
		{patSingleCount, []route{{http.MethodGet, h.countSingle}, {http.MethodHead, h.countSingle}}},
		{patSingle, []route{{http.MethodGet, h.querySingle}, {http.MethodHead, h.querySingle}}},
		{patAggregatedList, []route{{http.MethodGet, h.listAggregated}, {http.MethodHead, h.listAggregated}}},
		{patAggregated, []route{{http.MethodGet, h.queryAggregated}, {http.MethodHead, h.queryAggregated}, {http.MethodDelete, h.resetProjection(true)}}},
		{patOpenAPI, []route{{http.MethodGet, h.openAPI}, {http.MethodHead, h.openAPI}}},
		{patStatus, []route{{http.MethodGet, h.status}, {http.MethodHead, h.status}}},
		{patTenants, []route{{http.MethodGet, h.listTenants}, {http.MethodHead, h.listTenants}, {http.MethodPost, h.addTenant}}},
		{patTenant, []route{{http.MethodPut, h.updateTenant}, {http.MethodDelete, h.deleteTenant}}},
		{patReactionDefs, []route{{http.MethodGet, h.listReactionDefinitions}, {http.MethodHead, h.listReactionDefinitions},
			{http.MethodPost, h.createReactionDefinition}}},
		{patReactionDef, []route{{http.MethodGet, h.getReactionDefinition}, {http.MethodHead, h.getReactionDefinition},
			{http.MethodPut, h.putReactionDefinition}, {http.MethodDelete, h.deleteReactionDefinition}}},
		{patReactions, []route{{http.MethodGet, h.listReactions}, {http.MethodHead, h.listReactions}}},
		{patReaction, []route{{http.MethodGet, h.getReaction}, {http.MethodHead, h.getReaction}, {http.MethodDelete, h.deleteReaction}}},
		{patReactionExecute, []route{{http.MethodPost, h.executeReaction}}},
	}
}
