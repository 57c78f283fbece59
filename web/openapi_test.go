package web

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIMatchesRoutes: /api/v1/openapi.json documents every route the
// API serves, with the role it needs, and nothing it does not serve.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	s := newTestServer(t, &fakeBroker{}, nil)
	r := call(t, s.Handler(), req{path: "/api/v1/openapi.json"}) // no credentials: it is documentation
	if r.status != 200 {
		t.Fatalf("GET openapi.json: %d %s", r.status, r.body)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths map[string]map[string]struct {
			Role       string         `json:"x-xmq-role"`
			Responses  map[string]any `json:"responses"`
			Parameters []struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || len(doc.Servers) != 1 || doc.Servers[0].URL != apiPrefix {
		t.Fatalf("openapi %q, servers %+v: want 3.1.0 served at %s", doc.OpenAPI, doc.Servers, apiPrefix)
	}
	api := s.apiRoutes()
	covered := map[string]bool{} // "METHOD /path" of the routes some operation reaches
	param := regexp.MustCompile(`\{([a-z_]+)\}`)
	for path, ops := range doc.Paths {
		params := param.FindAllStringSubmatch(path, -1)
		concrete := param.ReplaceAllString(path, "x")
		for method, op := range ops {
			method = strings.ToUpper(method)
			rt, _, _, ok := api.lookup(method, apiPrefix+concrete)
			if !ok {
				t.Errorf("%s %s is documented but not served", method, path)
				continue
			}
			covered[rt.method+" "+rt.path] = true
			want := map[Role]string{"": "none", RoleViewer: "viewer", RoleAdmin: "admin"}[rt.role]
			if op.Role != want && !(rt.role == RoleViewer && op.Role == "any") {
				t.Errorf("%s %s: x-xmq-role %q, the route needs %q", method, path, op.Role, want)
			}
			if len(op.Responses) == 0 {
				t.Errorf("%s %s documents no response", method, path)
			}
			for _, p := range params {
				if !slices.ContainsFunc(op.Parameters, func(q struct {
					Name string `json:"name"`
					In   string `json:"in"`
				}) bool {
					return q.Name == p[1] && q.In == "path"
				}) {
					t.Errorf("%s %s: path parameter %s is not described", method, path, p[1])
				}
			}
		}
	}
	for _, rt := range api.routes {
		if !covered[rt.method+" "+rt.path] {
			t.Errorf("%s %s is served but not documented in openapi.json", rt.method, rt.path)
		}
	}
	// Every $ref names a schema that exists.
	for _, m := range regexp.MustCompile(`"#/components/schemas/([A-Za-z]+)"`).FindAllSubmatch(r.body, -1) {
		if _, ok := doc.Components.Schemas[string(m[1])]; !ok {
			t.Errorf("$ref to the undefined schema %s", m[1])
		}
	}
}
