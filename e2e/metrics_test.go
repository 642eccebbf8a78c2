package e2e_test

import (
	"bytes"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/internal/sandbox"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer collects log lines written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// metricValue reads one sample from the Prometheus text at /metrics; 0 when absent.
func metricValue(t *testing.T, text, name, labels string) float64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+labels) + ` ([0-9.e+-]+)$`)
	m := re.FindStringSubmatch(text)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

func TestMetricsFollowTheOperations(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		logs := &lockedBuffer{}
		g := gatewaytest.StartWith(t, d, gatewaytest.Options{Recovery: true, LogTo: logs})
		const card = "4111222233334444"
		refund := `{"order_id":"1","amount_cents":100,"currency":"EUR","card_number":"` + card + `"}`

		// One success and its replay.
		require.Equal(t, http.StatusCreated, g.Submit(t, "m:ok", "refunds.issue", refund, nil).Status)
		require.Equal(t, http.StatusOK, g.Submit(t, "m:ok", "refunds.issue", refund, nil).Status)
		// One mismatch.
		require.Equal(t, http.StatusUnprocessableEntity, g.Submit(t, "m:ok", "refunds.issue",
			`{"order_id":"2","amount_cents":100,"currency":"EUR"}`, nil).Status)
		// One UNKNOWN, reconciled.
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeDropAfterCommit, Path: "/refunds", Method: "POST", Count: 1})
		unknown := g.Submit(t, "m:unknown", "refunds.issue", `{"order_id":"3","amount_cents":100,"currency":"EUR","card_number":"`+card+`"}`,
			map[string]string{"Prefer": "wait=0"})
		require.Equal(t, http.StatusAccepted, unknown.Status)
		id := unknown.JSON(t)["id"].(string)
		gatewaytest.Eventually(t, 10*time.Second, "reconciled", func() bool { return opState(t, g, id).State == models.StateSucceeded })
		// One exhausted retry: the ticket downstream is unavailable for every attempt.
		g.Sandbox.AddFault(sandbox.Fault{Mode: sandbox.ModeUnavailable, Path: "/tickets", Count: 4})
		exhausted := g.Submit(t, "m:exhausted", "tickets.create", `{"subject":"x"}`, nil)
		require.Contains(t, []int{http.StatusCreated, http.StatusAccepted}, exhausted.Status)
		exID := exhausted.JSON(t)["id"].(string)
		gatewaytest.Eventually(t, 10*time.Second, "retries exhausted", func() bool { return opState(t, g, exID).State == models.StateFailedFinal })

		// Not on the public port: /metrics has a listener of its own.
		require.Equal(t, http.StatusNotFound, g.Do(t, http.MethodGet, "/metrics", "", nil, "").Status)
		text := g.Scrape(t)
		assert.Regexp(t, `(?m)^idemgate_build_info\{goversion="go[0-9.]+",revision="[^"]+",version="[^"]+"\} 1$`, text)
		assert.Equal(t, 3.0, metricValue(t, text, "idemgate_requests_total", `{outcome="created"}`))
		assert.Equal(t, 1.0, metricValue(t, text, "idemgate_requests_total", `{outcome="replayed"}`))
		assert.Equal(t, 1.0, metricValue(t, text, "idemgate_requests_total", `{outcome="mismatch"}`))
		assert.Equal(t, 2.0, metricValue(t, text, "idemgate_operations_total", `{state="SUCCEEDED",tool="refunds.issue"}`))
		assert.Equal(t, 1.0, metricValue(t, text, "idemgate_operations_total", `{state="UNKNOWN",tool="refunds.issue"}`))
		assert.Equal(t, 1.0, metricValue(t, text, "idemgate_operations_total", `{state="FAILED_FINAL",tool="tickets.create"}`))
		assert.Equal(t, 1.0, metricValue(t, text, "idemgate_retries_exhausted_total", `{tool="tickets.create"}`))
		assert.Equal(t, 4.0, metricValue(t, text, "idemgate_attempts_total", `{class="throttled",tool="tickets.create"}`))
		assert.Equal(t, 1.0, metricValue(t, text, "idemgate_attempts_total", `{class="ambiguous",tool="refunds.issue"}`))
		assert.GreaterOrEqual(t, metricValue(t, text, "idemgate_reconciliations_total", `{outcome="found",tool="refunds.issue"}`), 1.0)
		assert.Equal(t, 1.0, metricValue(t, text, "idemgate_ledger_up", ""))
		assert.Contains(t, text, "idemgate_downstream_duration_seconds_bucket")
		assert.Contains(t, text, `idemgate_http_requests_total{code="201",method="POST",route="/v1/operations"}`)

		// A sensitive param never reaches logs or metrics.
		assert.NotContains(t, text, card)
		require.Contains(t, logs.String(), `"msg":"state changed"`)
		assert.NotContains(t, logs.String(), card)
		assert.Equal(t, 1, strings.Count(logs.String(), `"operation_id":"`+id+`","tool":"refunds.issue","from":"RUNNING","to":"UNKNOWN"`))
	})
}
