package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/toolsimport"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// npmFile is the path of a file an npm package of e2e/agents installs (npm ci, which .ci/run
// runs, at the version package.json pins). Without it the test skips, unless CI is set: then
// it fails.
func npmFile(t testing.TB, rel string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("agents", "node_modules", rel))
	require.NoError(t, err)
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s not installed: cd e2e/agents && npm ci", rel)
		}
		t.Fatalf("%s not installed (cd e2e/agents && npm ci), and CI must run this test: %v", rel, err)
	}
	return path
}

// githubSpec is GitHub's official OpenAPI description of api.github.com (the npm package
// @octokit/openapi, pinned in e2e/agents/package.json): about 13 MB, 1,200 operations, its
// $refs kept (the .deref.json beside it is the same document expanded, 73 MB).
func githubSpec(t testing.TB) string {
	return npmFile(t, filepath.Join("@octokit", "openapi", "generated", "api.github.com.json"))
}

// prismLog is what a Prism process prints, kept for the test to read.
type prismLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *prismLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *prismLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// prismMock starts Stoplight's Prism (@stoplight/prism-cli, from e2e/agents) as a mock of
// spec in its validating mode: with --errors, a request the document does not allow is
// answered 4xx and logged as a violation, never mocked. It returns Prism's URL and its log.
func prismMock(t *testing.T, spec string) (string, *prismLog) {
	t.Helper()
	u, log, err := startPrism(t, spec, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return u, log
}

// startPrism is prismMock's start, failing with what Prism printed when it does not listen
// within wait. The process is stopped when the test ends.
func startPrism(t *testing.T, spec string, wait time.Duration) (string, *prismLog, error) {
	t.Helper()
	bin := npmFile(t, filepath.Join(".bin", "prism"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	log := &prismLog{}
	cmd := exec.Command(bin, "mock", "--errors", "--host", "127.0.0.1", "--port", fmt.Sprint(port), spec)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`Prism is listening on (http://\S+)`)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for sc.Scan() {
			_, _ = fmt.Fprintln(log, sc.Text())
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				ready <- m[1]
			}
		}
		close(ready)
	}()
	select {
	case u, ok := <-ready:
		if ok {
			return strings.TrimRight(u, "/"), log, nil
		}
	case <-time.After(wait):
	}
	return "", log, fmt.Errorf("Prism did not say where it listens:\n%s", tail(log.String(), 4000))
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// githubConnection is the block a person adds above the imported tools: the API's URL (here
// Prism's, through a recording proxy), a token, and the headers GitHub asks every client for.
const githubConnection = `connections:
  - name: github
    base_url: {{GITHUB}}
    auth: {bearer: {env: GITHUB_TOKEN}}
    headers:
      Accept: application/vnd.github+json
      X-GitHub-Api-Version: "2022-11-28"
`

// TestImportGitHubThroughPrism: what `tools import --openapi api.github.com.json --connection
// github` writes from GitHub's official description works unedited through the gateway against
// Prism, which validates every request against that document: a create-issue write (path
// params in the URL only, the rest as the JSON body), a list with per_page, a get, an update (PATCH). Each call
// SUCCEEDS, Prism answers 2xx and logs no violation; and kin-openapi's own request validator
// (which also checks JSON bodies against their schema) accepts every request the gateway sent.
// Both engines.
func TestImportGitHubThroughPrism(t *testing.T) {
	t.Parallel()
	spec := githubSpec(t)
	prism, plog := prismMock(t, spec)
	target, err := url.Parse(prism)
	require.NoError(t, err)

	data, err := os.ReadFile(spec)
	require.NoError(t, err)
	start := time.Now()
	f, err := toolsimport.OpenAPI(data, toolsimport.OpenAPIOptions{Connection: "github", Source: "api.github.com.json"})
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, f.WriteYAML(&buf))
	t.Logf("imported GitHub's %d operations in %s", len(f.Tools), time.Since(start))
	validate := githubValidator(t, data)
	bad := httptest.NewRequest(http.MethodPost, "/repos/octocat/hello-world/issues", nil)
	bad.Header.Set("Content-Type", "application/json")
	require.Error(t, validate(bad, []byte(`{"title":"x","assignees":"octocat"}`)), "the validator checks bodies")
	getenv := func(k string) string { return map[string]string{"GITHUB_TOKEN": "ghp_test123"}[k] }

	sent := 0 // requests sent to Prism, over the engines
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		proxy := &droppingProxy{target: target, drop: func(*http.Request) bool { return false }}
		var invalid []string
		var mu sync.Mutex
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if err := validate(r, body); err != nil {
				mu.Lock()
				invalid = append(invalid, r.Method+" "+r.URL.String()+": "+err.Error())
				mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			proxy.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		tools := strings.ReplaceAll(githubConnection, "{{GITHUB}}", srv.URL) + buf.String()
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Catalog: func(string) (*catalog.Catalog, error) {
			return catalog.LoadWith([]byte(tools), catalog.Options{Getenv: getenv})
		}})
		calls := []struct{ tool, params string }{
			{"github.issues_create", `{"owner":"octocat","repo":"hello-world","title":"Found a bug","body":"It broke.","labels":["bug"],"assignees":["octocat"]}`},
			{"github.issues_list_for_repo", `{"owner":"octocat","repo":"hello-world","per_page":2,"state":"open"}`},
			{"github.issues_get", `{"owner":"octocat","repo":"hello-world","issue_number":1347}`},
			{"github.issues_update", `{"owner":"octocat","repo":"hello-world","issue_number":1347,"state":"closed","state_reason":"completed"}`},
		}
		for i, c := range calls {
			r := g.Submit(t, fmt.Sprintf("github-%d", i), c.tool, c.params, map[string]string{"Prefer": "wait=60"})
			require.Contains(t, []int{http.StatusCreated, http.StatusOK}, r.Status, "%s: %s", c.tool, r.Body)
			op := r.JSON(t)
			require.Equal(t, "SUCCEEDED", op["state"], "%s: Prism took the request as imported: %s\n%s", c.tool, r.Body, tail(plog.String(), 3000))
		}
		mu.Lock()
		assert.Empty(t, invalid, "kin-openapi's validator refused a request the gateway sent")
		mu.Unlock()
		proxy.mu.Lock()
		seen := proxy.seen
		proxy.mu.Unlock()
		require.Len(t, seen, len(calls))
		sent += len(seen)
		assert.Equal(t, "POST /repos/octocat/hello-world/issues? ", seen[0][:len("POST /repos/octocat/hello-world/issues? ")],
			"the path params in the URL only: %s", seen[0])
		assert.NotContains(t, seen[0], `"owner"`, "the path params in the URL only")
		assert.Contains(t, seen[0], `"title":"Found a bug"`)
		assert.Contains(t, seen, "GET /repos/octocat/hello-world/issues?per_page=2&state=open ", "a list's optional params in its query")
		assert.Contains(t, seen, "GET /repos/octocat/hello-world/issues/1347? ")
		assert.Contains(t, seen, `PATCH /repos/octocat/hello-world/issues/1347? {"state":"closed","state_reason":"completed"}`)
	})

	// Prism's own verdict on every request it was sent: passed, and none refused.
	log := plog.String()
	require.Positive(t, sent)
	assert.Equal(t, sent, strings.Count(log, "The request passed the validation rules"), "%s", tail(log, 3000))
	for _, bad := range []string{"did not pass the validation rules", "Violation:", "Request terminated with error"} {
		assert.NotContains(t, log, bad, "Prism refused a request the gateway sent")
	}
}

// githubPaths are the paths of the operations TestImportGitHubThroughPrism calls.
var githubPaths = []string{"/repos/{owner}/{repo}/issues", "/repos/{owner}/{repo}/issues/{issue_number}"}

// githubValidator checks a request against GitHub's document as kin-openapi's request
// validator does (path, query and header parameters, and the JSON body against its schema),
// with the document's server taken to be wherever the request went. Security is not checked:
// the document declares no scheme.
func githubValidator(t *testing.T, data []byte) func(*http.Request, []byte) error {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(data)
	require.NoError(t, err)
	doc.Servers = openapi3.Servers{{URL: "/"}}
	// Only the paths called: the router refuses the whole document, whose paths
	// /orgs/{org}/attestations/{subject_digest} and …/{attestation_id} are the same template.
	keep := openapi3.NewPaths()
	for _, p := range githubPaths {
		keep.Set(p, doc.Paths.Value(p))
	}
	doc.Paths = keep
	router, err := legacy.NewRouter(doc, openapi3.DisableExamplesValidation(), openapi3.DisableSchemaPatternValidation(),
		openapi3.DisableSchemaDefaultsValidation(), openapi3.DisableSchemaFormatValidation())
	require.NoError(t, err)
	return func(r *http.Request, body []byte) error {
		req := r.Clone(context.Background())
		req.Body = io.NopCloser(bytes.NewReader(body))
		route, params, err := router.FindRoute(req)
		if err != nil {
			return err
		}
		return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
			Request: req, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
		})
	}
}
