package web

import (
	_ "embed"
	"net/http"
)

// openAPIDoc describes /api/v1 in OpenAPI 3.1. It is written by hand next
// to the routes; TestOpenAPIMatchesRoutes keeps the two equal (every
// route documented, nothing documented that is not served, each with its
// role).
//
//go:embed openapi.json
var openAPIDoc []byte

// openAPI serves GET /api/v1/openapi.json, without credentials: it
// describes the API, not the broker.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request, _ principal, _ string) error {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDoc)
	return nil
}
