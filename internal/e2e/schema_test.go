package e2e

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPostgresSchemas: two servers on one database, one with
// -postgres-schema and one with search_path in its URL, keep separate
// stores, and a server started again on a schema finds its events.
func TestPostgresSchemas(t *testing.T) {
	url := freshDatabase(t)
	a := startServer(t, url, "-postgres-schema", "tenant_a")
	b := startServer(t, url+"&search_path=tenant_b")
	save := func(s *server, id string) {
		s.mustDo(http.MethodPost, "/aggregates/order/o-1/events", map[string]any{
			"events": []map[string]any{{"eventId": id, "eventType": "Placed", "data": map[string]any{}}},
		}, http.StatusOK)
	}
	save(a, "7c9e6679-7425-40de-944b-e07fc1f90ae7")
	b.mustDo(http.MethodGet, "/aggregates/order/o-1", nil, http.StatusNotFound)
	save(b, "7c9e6679-7425-40de-944b-e07fc1f90ae8")
	a.kill()
	a2 := startServer(t, url, "-postgres-schema", "tenant_a")
	body := a2.mustDo(http.MethodGet, "/aggregates/order/o-1", nil, http.StatusOK)
	assert.Contains(t, string(body), "7c9e6679-7425-40de-944b-e07fc1f90ae7")
	assert.NotContains(t, string(body), "7c9e6679-7425-40de-944b-e07fc1f90ae8")
	pub := startServer(t, url)
	pub.mustDo(http.MethodGet, "/aggregates/order/o-1", nil, http.StatusNotFound)
}
