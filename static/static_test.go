package static_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemgate/idemgate/static"
)

func serve(t *testing.T, method, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	static.Handler().ServeHTTP(rec, req)
	return rec.Result()
}

func TestPathIsContentHashed(t *testing.T) {
	t.Parallel()
	css := static.Path("app.css")
	assert.Regexp(t, regexp.MustCompile(`^/static/app\.[0-9a-f]{8}\.css$`), css)
	assert.Equal(t, css, static.Path("app.css"), "computed once, stable")
	assert.Regexp(t, regexp.MustCompile(`^/static/favicon\.[0-9a-f]{8}\.svg$`), static.Path("favicon.svg"))
}

func TestPathPanicsOnUnknownName(t *testing.T) {
	t.Parallel()
	assert.PanicsWithValue(t, `static: no embedded file named "missing.css"`, func() { static.Path("missing.css") })
}

func TestHandlerServesHashedFile(t *testing.T) {
	t.Parallel()
	res := serve(t, http.MethodGet, static.Path("app.css"), nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "public, max-age=31536000, immutable", res.Header.Get("Cache-Control"))
	assert.Equal(t, "text/css; charset=utf-8", res.Header.Get("Content-Type"))
	assert.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), ".badge--unknown")
	assert.Contains(t, string(body), "light-dark(", "one palette for both schemes")

	etag := res.Header.Get("ETag")
	require.NotEmpty(t, etag)
	assert.Contains(t, static.Path("app.css"), strings.Trim(etag, `"`), "the ETag is the hash in the URL")
}

func TestHandlerHeadAndConditional(t *testing.T) {
	t.Parallel()
	url := static.Path("favicon.svg")
	head := serve(t, http.MethodHead, url, nil)
	require.Equal(t, http.StatusOK, head.StatusCode)
	assert.Equal(t, "image/svg+xml", head.Header.Get("Content-Type"))
	body, err := io.ReadAll(head.Body)
	require.NoError(t, err)
	assert.Empty(t, body)

	cond := serve(t, http.MethodGet, url, http.Header{"If-None-Match": {head.Header.Get("ETag")}})
	assert.Equal(t, http.StatusNotModified, cond.StatusCode)
}

func TestHandlerRefusesWhatItDoesNotServe(t *testing.T) {
	t.Parallel()
	hashed := static.Path("app.css")
	for name, target := range map[string]string{
		"unknown file":       "/static/nothing.css",
		"name without hash":  "/static/app.css",
		"outdated hash":      "/static/app.00000000.css",
		"prefix stripped":    strings.TrimPrefix(hashed, "/static"),
		"directory":          "/static/",
		"path traversal":     "/static/../static.go",
		"embedded directory": "/static/assets/app.css",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, http.StatusNotFound, serve(t, http.MethodGet, target, nil).StatusCode)
		})
	}
	t.Run("method not allowed", func(t *testing.T) {
		t.Parallel()
		res := serve(t, http.MethodPost, hashed, nil)
		assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
		assert.Equal(t, "GET, HEAD", res.Header.Get("Allow"))
	})
}
