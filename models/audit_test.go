package models_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func appendN(t *testing.T, l *models.Ledger, n int) {
	t.Helper()
	for i := range n {
		_, err := l.Audit(context.Background(), models.AuditInput{Actor: "user:ann@x", Action: "test.entry", Tenant: "acme",
			Outcome: "ok", RequestID: fmt.Sprintf("req-%d", i), Detail: map[string]any{"i": i}})
		require.NoError(t, err)
	}
}

func TestAuditVerifyDetectsTampering(t *testing.T) {
	cases := []struct {
		name    string
		tamper  string
		breakAt int64
	}{
		{"edited", "UPDATE audit_log SET actor = 'user:mallory@x' WHERE seq = 3", 3},
		{"removed", "DELETE FROM audit_log WHERE seq = 3", 3},
		{"reordered", "UPDATE audit_log SET seq = -2 WHERE seq = 2; UPDATE audit_log SET seq = 2 WHERE seq = 3; UPDATE audit_log SET seq = 3 WHERE seq = -2", 2},
	}
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				l := testdb.Ledger(t, d)
				appendN(t, l, 5)
				seq, head, err := l.VerifyAudit(context.Background())
				require.NoError(t, err)
				assert.Equal(t, int64(5), seq)
				assert.Regexp(t, `^[0-9a-f]{64}$`, head)

				for _, stmt := range strings.Split(tc.tamper, ";") {
					require.NoError(t, l.DB().Exec(stmt).Error)
				}
				_, _, err = l.VerifyAudit(context.Background())
				var br *models.ChainBreak
				require.True(t, errors.As(err, &br), "want a chain break, got %v", err)
				assert.Equal(t, tc.breakAt, br.Seq)
			})
		}
	})
}

func TestAuditConcurrentWritersKeepOneChain(t *testing.T) {
	l := testdb.Ledger(t, models.Postgres)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				_, err := l.Audit(context.Background(), models.AuditInput{Actor: fmt.Sprintf("worker:%d", w), Action: "test.concurrent",
					Outcome: "ok", Detail: map[string]any{"i": i}})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	seq, _, err := l.VerifyAudit(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(200), seq)
}

func TestReviewActionsAreAudited(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		op := unknownOp(t, l, c, "audited")
		a := action(op, "ann@x")
		a.RequestID = "req-42"
		_, err := l.MarkFailed(ctx, a)
		require.NoError(t, err)
		var entries []models.AuditEntry
		require.NoError(t, l.DB().Where("operation_id = ?", op.ID).Find(&entries).Error)
		require.Len(t, entries, 1)
		assert.Equal(t, "review.mark_failed", entries[0].Action)
		assert.Equal(t, "user:ann@x", entries[0].Actor)
		assert.Equal(t, "req-42", entries[0].RequestID)
		assert.Equal(t, "acme", entries[0].Tenant)
	})
}

// TestAuditChainFromLegacyToCanonical: a ledger upgraded with legacy entries keeps them as
// they are, continues in the canonical form, and refuses a legacy entry after a canonical one.
func TestAuditChainFromLegacyToCanonical(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		l := testdb.Ledger(t, d)
		legacy := fixedEntry()
		legacy.Seq, legacy.Hash = 1, "sha256:"
		legacy.Hash = legacy.ComputeHash()
		require.True(t, legacy.Legacy())
		require.NoError(t, l.DB().Create(legacy).Error)
		appendN(t, l, 2)
		seq, head, err := l.VerifyAudit(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(3), seq)
		assert.Regexp(t, `^[0-9a-f]{64}$`, head, "entries after the legacy ones are canonical")
		second, err := l.AuditEntryAt(ctx, 2)
		require.NoError(t, err)
		assert.Equal(t, legacy.Hash, second.PrevHash)

		// Entry 3 rewritten in the legacy form, consistently with its predecessor: refused.
		third, err := l.AuditEntryAt(ctx, 3)
		require.NoError(t, err)
		third.Hash = "sha256:"
		third.Hash = third.ComputeHash()
		require.NoError(t, l.DB().Exec("UPDATE audit_log SET hash = ? WHERE seq = 3", third.Hash).Error)
		_, _, err = l.VerifyAudit(ctx)
		var br *models.ChainBreak
		require.True(t, errors.As(err, &br), "want a chain break, got %v", err)
		assert.Equal(t, int64(3), br.Seq)
		assert.Contains(t, br.Reason, "legacy-form hash after entries in the canonical form")
	})
}
