package jobs_test

import (
	"testing"
	"time"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCompensable: the one decision of whether an operation can be compensated. Only a
// SUCCEEDED operation of a tool that declares a compensation, whose record is kept, can be;
// every other case is CodeNotCompensable naming the operation.
func TestCompensable(t *testing.T) {
	t.Parallel()
	cat := catalog.Demo("http://127.0.0.1:9")
	// The call is built by an executor, which opens sealed params through its ledger; these
	// params are in clear, so the ledger needs no database.
	exec := jobs.NewExecutor(jobs.ExecutorConfig{Ledger: models.New(models.Config{}), Catalog: cat})
	params, result := `{"subject":"printer on fire"}`, `{"id":"T-1001"}`
	succeeded := func(tool string) *models.Operation {
		return &models.Operation{ID: "op_1", Key: "k", Tenant: "acme", Tool: tool, State: models.StateSucceeded,
			Params: &params, Result: &result}
	}
	t.Run("a SUCCEEDED operation of a tool with a compensation", func(t *testing.T) {
		by, err := jobs.Compensable(cat, succeeded("tickets.create"))
		require.NoError(t, err)
		assert.Equal(t, "tickets.close", by.Name)
		tool, call, err := exec.CompensationCall(succeeded("tickets.create"))
		require.NoError(t, err)
		assert.Same(t, by, tool, "the call is made with the tool Compensable named")
		assert.JSONEq(t, `{"ticket_id":"T-1001","reason":"compensation for op_1"}`, string(call))
	})
	t.Run("already compensated still yields its call, to replay it", func(t *testing.T) {
		op := succeeded("tickets.create")
		op.CompensatedBy = new("op_2")
		_, err := jobs.Compensable(cat, op)
		assert.NoError(t, err)
	})

	refused := map[string]*models.Operation{}
	for _, s := range models.States {
		if s != models.StateSucceeded {
			op := succeeded("tickets.create")
			op.State = s
			refused["state "+string(s)] = op
		}
	}
	purged := succeeded("tickets.create")
	purged.Params, purged.Result, purged.PurgedAt = nil, nil, new(time.Now())
	refused["record passed its retention"] = purged
	refused["tool without a compensation"] = succeeded("refunds.issue")
	refused["tool no longer in the catalogue"] = succeeded("tickets.retired")
	for name, op := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := jobs.Compensable(cat, op)
			require.Error(t, err)
			assert.Equal(t, models.CodeNotCompensable, models.ErrorCode(err))
			assert.Same(t, op, models.ErrorOperation(err), "the refusal names the operation")
			_, _, callErr := exec.CompensationCall(op)
			assert.Equal(t, err.Error(), callErr.Error(), "no call is built for what Compensable refuses")
		})
	}
}
