package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/idemgate/idemgate/client"
	"github.com/idemgate/idemgate/internal/gatewaytest"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKilledWorkflowResumes runs the example against a real gateway, kills it right after it
// sent each step in turn, runs it again with the same run id, and counts the side effects the
// downstream committed: one per step, whatever the crash.
func TestKilledWorkflowResumes(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		for i, killAfter := range []string{StepTicket, StepRefund, StepEmail} {
			t.Run("killed after "+killAfter, func(t *testing.T) {
				g := gatewaytest.Start(t, d)
				env := map[string]string{"IDEMGATE_URL": g.URL, "IDEMGATE_API_KEY": g.Key}
				getenv := func(k string) string { return env[k] }
				var out, errs bytes.Buffer

				err := run(t.Context(), []string{"-run", "wf-8472", "-kill-after", killAfter}, getenv, &out, &errs)
				require.ErrorIs(t, err, errKilled)
				assert.Contains(t, errs.String(), "run again with -run wf-8472")
				for j, kind := range []string{"tickets", "refunds", "emails"} {
					want := 0
					if j <= i {
						want = 1 // the killed step was sent and took effect; later ones were not sent
					}
					assert.Equal(t, want, g.Sandbox.Committed(kind), "%s committed before the crash", kind)
				}

				out.Reset()
				require.NoError(t, run(t.Context(), []string{"-run", "wf-8472"}, getenv, &out, &errs), errs.String())
				for j, step := range []string{StepTicket, StepRefund, StepEmail} {
					if j <= i {
						assert.Contains(t, lineOf(out.String(), step), "already done", "the resumed run read %s back", step)
					} else {
						assert.Contains(t, lineOf(out.String(), step), "SUCCEEDED", "the resumed run sent %s", step)
					}
				}
				assert.Contains(t, out.String(), "workflow wf-8472 complete: ticket T-1001, refund R-5001, email E-")

				out.Reset()
				require.NoError(t, run(t.Context(), []string{"-run", "wf-8472"}, getenv, &out, &errs), errs.String())
				assert.Equal(t, 3, strings.Count(out.String(), "already done"), "a finished run repeats nothing:\n%s", out.String())

				for _, kind := range []string{"tickets", "refunds", "emails"} {
					assert.Equal(t, 1, g.Sandbox.Committed(kind), "one %s in all", kind)
				}
				assert.Equal(t, int64(3), g.Count(t), "one operation per step")
			})
		}
	})
}

// lineOf is the line of out about step.
func lineOf(out, step string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, step+" ") {
			return line
		}
	}
	return ""
}

// TestWorkflowRefusesAnotherCallsKey (issue 50 item 9): after the README's tour, which records
// its "Printer on fire" ticket under wf-1:create-ticket, a workflow run as wf-1 stops at its
// first step with an error naming the key, instead of taking the tour's ticket for its own
// complaint ticket and going on to refund and email.
func TestWorkflowRefusesAnotherCallsKey(t *testing.T) {
	t.Parallel()
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		g := gatewaytest.Start(t, d)
		g.Submit(t, "wf-1:create-ticket", "tickets.create", `{"subject":"Printer on fire","priority":"high"}`, nil)
		require.Equal(t, 1, g.Sandbox.Committed("tickets"))
		env := map[string]string{"IDEMGATE_URL": g.URL, "IDEMGATE_API_KEY": g.Key}
		var out, errs bytes.Buffer
		err := run(t.Context(), []string{"-run", "wf-1"}, func(k string) string { return env[k] }, &out, &errs)
		require.ErrorIs(t, err, client.ErrKeyMismatch)
		assert.Contains(t, err.Error(), `run "wf-1" already used the key wf-1:create-ticket for another call`)
		assert.NotContains(t, out.String(), "already done")
		for kind, want := range map[string]int{"tickets": 1, "refunds": 0, "emails": 0} {
			assert.Equal(t, want, g.Sandbox.Committed(kind), kind)
		}
	})
}

func TestRunNeedsARunID(t *testing.T) {
	t.Parallel()
	var out, errs bytes.Buffer
	err := run(t.Context(), []string{"-key", "idg_x"}, func(string) string { return "" }, &out, &errs)
	require.Error(t, err)
	assert.Contains(t, errs.String(), "-run")
}
