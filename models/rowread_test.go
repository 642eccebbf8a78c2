package models_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm/schema"
)

// TestOperationColumns: the hand-written column list of the hot reads names every column of
// the Operation record, in an order whose scan gives back exactly what GORM reads, on both
// engines. A field added to Operation and not to the list fails here.
func TestOperationColumns(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		s, err := schema.Parse(&models.Operation{}, &sync.Map{}, l.DB().NamingStrategy)
		require.NoError(t, err)
		assert.ElementsMatch(t, s.DBNames, strings.Split(models.OperationColumns, ", "))

		// Every nullable column set, each to a value no other column holds.
		at := func(sec int) *time.Time { v := time.Date(2026, 11, 30, 1, 0, sec, 123000, time.UTC); return &v }
		str := func(v string) *string { return &v }
		num := 422
		full := models.Operation{
			ID: "op_full", Tenant: "acme", Key: "k-full", Tool: "tickets.create", Fingerprint: "sha256:ff",
			Params: str(`{"a":1}`), Result: str(`{"id":"R"}`), State: models.StateUnknown,
			ErrorClass: str("timeout"), ErrorMessage: str("no answer"), DownstreamStatus: &num, DownstreamRef: str("R-9"),
			Attempts: 3, Ambiguous: true, NextAttemptAt: at(1), LeaseOwner: str("w9"), LeaseExpiresAt: at(2), Fence: 7,
			PrincipalID: c.PrincipalID, APIKeyID: c.Key.ID, WorkflowRunID: str("run1"), StepID: str("step1"),
			Compensates: str("op_a"), CompensatedBy: str("op_b"), ReviewID: str("rev_none"), UnknownSince: at(3),
			Probes: 4, NextProbeAt: at(4), CreatedAt: *at(5), UpdatedAt: *at(6), CompletedAt: at(7), PurgedAt: at(8),
			ParamsSealed: str("v1:0000:sealed"), DownstreamKey: str("dk_00000000000000000000000000000000"),
			Justification: str("because"), UpstreamResult: str(`{"content":[]}`),
		}
		require.NoError(t, l.DB().Create(&full).Error)

		var viaGORM models.Operation
		require.NoError(t, l.DB().Where("id = ?", full.ID).Take(&viaGORM).Error)
		got, err := l.GetByKey(context.Background(), "acme", "k-full")
		require.NoError(t, err)
		got.Review = nil // the review id names no review: nothing was attached
		assertSameOperation(t, &viaGORM, got)
		assertSameOperation(t, &full, got)

		byID, err := l.Get(context.Background(), "acme", "op_full")
		require.NoError(t, err)
		byID.Review = nil
		assertSameOperation(t, &full, byID)

		_, err = l.Get(context.Background(), "other-tenant", "op_full")
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
		_, err = l.GetByKey(context.Background(), "acme", "k-missing")
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
	})
}

// assertSameOperation compares field by field, instants as instants (drivers differ in the
// time.Location they hand back).
func assertSameOperation(t *testing.T, want, got *models.Operation) {
	t.Helper()
	norm := func(op models.Operation) models.Operation {
		for _, p := range []**time.Time{&op.NextAttemptAt, &op.LeaseExpiresAt, &op.UnknownSince, &op.NextProbeAt, &op.CompletedAt, &op.PurgedAt} {
			if *p != nil {
				u := (*p).UTC()
				*p = &u
			}
		}
		op.CreatedAt, op.UpdatedAt = op.CreatedAt.UTC(), op.UpdatedAt.UTC()
		return op
	}
	assert.Equal(t, norm(*want), norm(*got))
}
