package httpapi

import (
	_ "embed"
	"net/http"
)

// OpenAPI is the OpenAPI 3.1 document of the endpoints New serves, as JSON.
// The handler serves it at GET /openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

// openAPI serves GET /openapi.json.
func (h *handler) openAPI(w http.ResponseWriter, r *http.Request) {
	h.send(w, r, OpenAPI, acceptsGzip(r))
}
