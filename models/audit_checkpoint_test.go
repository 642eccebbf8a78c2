package models_test

import (
	"context"
	"errors"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVerifyAuditChainKeepsACheckpoint(t *testing.T) {
	cases := []struct {
		name    string
		tamper  func(t *testing.T, l *models.Ledger)
		breakAt int64 // 0: the chain holds
		reason  string
	}{
		{"untouched, and grown since", func(t *testing.T, l *models.Ledger) { appendN(t, l, 2) }, 0, ""},
		{"tail removed", func(t *testing.T, l *models.Ledger) {
			require.NoError(t, l.DB().Exec("DELETE FROM audit_log WHERE seq >= 4").Error)
		}, 4, "tail removed"},
		{"tail removed, then as many entries appended", func(t *testing.T, l *models.Ledger) {
			require.NoError(t, l.DB().Exec("DELETE FROM audit_log WHERE seq >= 4").Error)
			appendN(t, l, 2)
		}, 5, "rewritten"},
		{"everything rewritten with fresh hashes", func(t *testing.T, l *models.Ledger) {
			require.NoError(t, l.DB().Exec("DELETE FROM audit_log").Error)
			appendN(t, l, 6)
		}, 5, "rewritten"},
	}
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				l := testdb.Ledger(t, d)
				_, ok, err := l.LastAuditVerification(ctx)
				require.NoError(t, err)
				require.False(t, ok)
				appendN(t, l, 5)
				cp, err := l.VerifyAuditChain(ctx)
				require.NoError(t, err)
				assert.Equal(t, int64(5), cp.Seq)
				stored, ok, err := l.LastAuditVerification(ctx)
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, cp.Hash, stored.Hash)

				tc.tamper(t, l)
				_, err = l.VerifyAuditChain(ctx)
				if tc.breakAt == 0 {
					require.NoError(t, err)
					stored, _, err := l.LastAuditVerification(ctx)
					require.NoError(t, err)
					assert.Equal(t, int64(7), stored.Seq, "the checkpoint moves to the new head")
					return
				}
				var br *models.ChainBreak
				require.True(t, errors.As(err, &br), "want a chain break, got %v", err)
				assert.Equal(t, tc.breakAt, br.Seq)
				assert.Contains(t, br.Reason, tc.reason)
				stored, _, err = l.LastAuditVerification(ctx)
				require.NoError(t, err)
				assert.Equal(t, cp, stored, "a failed verification keeps the last good checkpoint")
			})
		}
	})
}

func TestExportBatchRefusesUnboundedBatches(t *testing.T) {
	l := testdb.Ledger(t, models.SQLite)
	for _, n := range []int{0, -1, models.MaxExportBatch + 1} {
		_, err := l.ExportBatch(context.Background(), models.AllTenants(), models.ExportFilter{}, "", n)
		assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "limit %d", n)
	}
}
