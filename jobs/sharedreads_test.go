package jobs

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSharedReads: waiters that ask at the same moment share one read; a waiter that asks
// for a read begun after its own moment never takes an earlier one; tenants never share.
func TestSharedReads(t *testing.T) {
	t.Parallel()
	var reads atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	s := newSharedReads(func(_ context.Context, tenant, id string) (*models.Operation, error) {
		n := reads.Add(1)
		started <- struct{}{}
		<-release
		return &models.Operation{ID: id, Tenant: tenant, Attempts: int(n)}, nil
	})
	ctx := context.Background()
	before := time.Now()

	// The first waiter starts a read; nine more, whose moment precedes it, join it.
	got := make([]*models.Operation, 10)
	var wg sync.WaitGroup
	wg.Go(func() { got[0], _ = s.get(ctx, "acme", "op_1", before) })
	<-started
	for i := 1; i < 10; i++ {
		wg.Go(func() { got[i], _ = s.get(ctx, "acme", "op_1", before) })
	}
	// Every joiner has joined before anything else happens: one scheduled after the reads
	// end would find none to join and read on its own, which is right but not this test.
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		r := s.latest["acme\x00op_1"]
		return r != nil && r.joined == 9
	}, 10*time.Second, time.Millisecond, "the nine joiners join the first read")
	// A waiter whose moment comes after the read began starts a read of its own.
	var late *models.Operation
	wg.Go(func() { late, _ = s.get(ctx, "acme", "op_1", time.Now().Add(time.Millisecond)) })
	<-started
	// Another tenant's operation of the same id is read apart.
	var other *models.Operation
	wg.Go(func() { other, _ = s.get(ctx, "other", "op_1", before) })
	<-started
	close(release)
	wg.Wait()

	// Eleven waiters of acme's operation, two reads: the ten of the first moment share the
	// first, the late one has its own; the other tenant's is the third.
	assert.EqualValues(t, 3, reads.Load())
	for i, op := range got {
		require.NotNil(t, op, "waiter %d", i)
		assert.Equal(t, 1, op.Attempts, "waiter %d shares the first read", i)
	}
	assert.Equal(t, 1, got[0].Attempts)
	assert.NotSame(t, got[0], got[1], "each waiter owns its copy")
	require.NotNil(t, late)
	assert.NotEqual(t, 1, late.Attempts, "a later moment is never answered by an earlier read")
	require.NotNil(t, other)
	assert.Equal(t, "other", other.Tenant)
}
