package api_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/app"
	"github.com/switchyard-ai/switchyard/shared/redisconn"
	"github.com/switchyard-ai/switchyard/shared/testkit"
)

// openAPIHandler builds the dispatcher's echo instance through the same wiring as the
// binary, so the routes compared are exactly the served ones.
func openAPIHandler(t *testing.T) *echo.Echo {
	t.Helper()
	_, pool := testkit.DB(t)
	redisURL, rdb := testkit.Redis(t)
	opt, err := redisconn.Asynq(redisURL)
	require.NoError(t, err)
	a := app.New(app.Options{DB: pool, Redis: rdb, Asynq: opt, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(a.Stop)
	return a.Handler()
}

// openAPIDoc is the part of an OpenAPI document the route check reads.
type openAPIDoc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

// undocumented are operational routes outside the public API document's scope: health,
// metrics, and the web UI with the root's redirect to it.
func undocumented(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics" || path == "/" ||
		path == "/ui" || strings.HasPrefix(path, "/ui/") || strings.HasPrefix(path, "/ui*")
}

var echoParam = regexp.MustCompile(`:[A-Za-z0-9_]+`)
var docParam = regexp.MustCompile(`\{[^}]+\}`)

// registeredRoutes lists "METHOD /path/{}" for every route of e, with parameter names
// normalised (the public name is the document's, the echo name is internal). Group
// catch-alls that only answer 404 are left out.
func registeredRoutes(e *echo.Echo) []string {
	var out []string
	for _, r := range e.Routes() {
		if undocumented(r.Path) || strings.HasSuffix(r.Path, "*") || r.Path == "/api/v1" ||
			r.Method == echo.RouteNotFound {
			continue
		}
		out = append(out, r.Method+" "+echoParam.ReplaceAllString(r.Path, "{}"))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// documentedRoutes lists "METHOD /path/{}" for every operation of the document.
func documentedRoutes(doc openAPIDoc) []string {
	var out []string
	for path, item := range doc.Paths {
		if undocumented(path) {
			continue
		}
		for m := range item {
			if slices.Contains(httpMethods, m) {
				out = append(out, strings.ToUpper(m)+" "+docParam.ReplaceAllString(path, "{}"))
			}
		}
	}
	slices.Sort(out)
	return out
}

// diffRoutes returns the registered routes the document lacks and the documented routes
// that are not registered.
func diffRoutes(registered, documented []string) (missing, extra []string) {
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			missing = append(missing, r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			extra = append(extra, d)
		}
	}
	return missing, extra
}

func TestDiffRoutesCatchesDrift(t *testing.T) {
	t.Parallel()
	missing, extra := diffRoutes(
		[]string{"GET /api/v1/a", "POST /api/v1/b/{}"},
		[]string{"GET /api/v1/a", "DELETE /api/v1/c"})
	require.Equal(t, []string{"POST /api/v1/b/{}"}, missing)
	require.Equal(t, []string{"DELETE /api/v1/c"}, extra)
	missing, extra = diffRoutes([]string{"GET /x"}, []string{"GET /x"})
	require.Empty(t, missing)
	require.Empty(t, extra)
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	e := openAPIHandler(t)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)

	// Served without a key.
	resp, err := http.Get(srv.URL + "/api/v1/openapi.json")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "application/json")
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var doc openAPIDoc
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)

	missing, extra := diffRoutes(registeredRoutes(e), documentedRoutes(doc))
	require.Empty(t, missing, "routes registered in server.go but missing from internal/api/openapi.json")
	require.Empty(t, extra, "routes in internal/api/openapi.json that the server does not register")
}

func TestOpenAPIDocumentIsConsistent(t *testing.T) {
	t.Parallel()
	raw, err := http.Dir(".").Open("openapi.json")
	require.NoError(t, err)
	defer raw.Close()
	var tree any
	require.NoError(t, json.NewDecoder(raw).Decode(&tree))
	root := tree.(map[string]any)

	// Every $ref resolves inside the document.
	var refs []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if r, ok := x["$ref"].(string); ok {
				refs = append(refs, r)
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(root)
	require.NotEmpty(t, refs)
	for _, ref := range refs {
		require.True(t, strings.HasPrefix(ref, "#/"), "external ref %s", ref)
		var node any = root
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, ok := node.(map[string]any)
			require.True(t, ok, "ref %s", ref)
			node, ok = m[part]
			require.True(t, ok, "ref %s does not resolve", ref)
		}
	}

	// Every operation has a unique operationId and responses, and declares each path
	// parameter of its template.
	ids := map[string]string{}
	for path, item := range root["paths"].(map[string]any) {
		want := docParam.FindAllString(path, -1)
		for m, o := range item.(map[string]any) {
			if !slices.Contains(httpMethods, m) {
				continue
			}
			op := o.(map[string]any)
			id, _ := op["operationId"].(string)
			require.NotEmpty(t, id, "%s %s has no operationId", m, path)
			require.NotContains(t, ids, id, "operationId %s is used twice", id)
			ids[id] = path
			require.NotEmpty(t, op["responses"], "%s %s has no responses", m, path)
			var declared []string
			params, _ := op["parameters"].([]any)
			for _, p := range params {
				pm := p.(map[string]any)
				if pm["in"] == "path" {
					declared = append(declared, "{"+pm["name"].(string)+"}")
				}
			}
			slices.Sort(declared)
			sorted := slices.Clone(want)
			slices.Sort(sorted)
			require.Equal(t, sorted, declared, "%s %s path parameters", m, path)
		}
	}
}
