package models_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spec2 is docs/STATES.md's list of legal transitions, written out from that page rather than read
// from the ledger, so that the ledger is checked against the contract.
var spec2 = map[[2]models.State]bool{
	{models.StateAwaitingApproval, models.StatePending}:     true, // approved
	{models.StateAwaitingApproval, models.StateFailedFinal}: true, // rejected, cancelled
	{models.StatePending, models.StateRunning}:              true, // claimed
	{models.StatePending, models.StateFailedFinal}:          true, // cancelled
	{models.StateRunning, models.StateSucceeded}:            true,
	{models.StateRunning, models.StateFailedFinal}:          true,
	{models.StateRunning, models.StatePending}:              true, // retry proven safe
	{models.StateRunning, models.StateUnknown}:              true,
	{models.StateUnknown, models.StateSucceeded}:            true,
	{models.StateUnknown, models.StatePending}:              true, // proven not executed
	{models.StateUnknown, models.StateFailedFinal}:          true,
}

// everyPair is every (from, to) pair of the six states, self-transitions included.
func everyPair() [][2]models.State {
	var out [][2]models.State
	for _, from := range models.States {
		for _, to := range models.States {
			out = append(out, [2]models.State{from, to})
		}
	}
	return out
}

func TestStateMachineIsSpec2(t *testing.T) {
	t.Parallel()
	legal := 0
	for _, p := range everyPair() {
		assert.Equal(t, spec2[p], models.CanTransition(p[0], p[1]), "%s → %s", p[0], p[1])
		if models.CanTransition(p[0], p[1]) {
			legal++
		}
	}
	assert.Equal(t, len(spec2), legal, "the legal transitions are docs/STATES.md's and no others")
	for _, s := range models.States {
		if s.Terminal() {
			for _, to := range models.States {
				assert.False(t, models.CanTransition(s, to), "%s never changes (to %s)", s, to)
			}
		}
	}
}

// TestLedgerWritesOnlyLegalTransitions drives every (from, to) pair through the ledger's one
// compare-and-set on a real database: a legal one changes the row and records its event in
// the same transaction, once (the same write again finds another state: CodeStale); an
// illegal one is refused and writes nothing.
func TestLedgerWritesOnlyLegalTransitions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		for i, p := range everyPair() {
			from, to := p[0], p[1]
			t.Run(fmt.Sprintf("%s → %s", from, to), func(t *testing.T) {
				op := operationIn(t, l, c, fmt.Sprintf("pair-%d", i), from)
				before := events(t, l, op)

				err := l.TransitionForTest(ctx, op, from, to, 0)
				got, gerr := l.Get(ctx, op.Tenant, op.ID)
				require.NoError(t, gerr)
				after := events(t, l, op)
				if !spec2[p] {
					require.ErrorIs(t, err, models.ErrIllegalTransition)
					assert.Equal(t, from, got.State, "an illegal transition changes nothing")
					assert.Len(t, after, len(before), "and records no event")
					return
				}
				require.NoError(t, err)
				assert.Equal(t, to, got.State)
				assert.Equal(t, to.Terminal(), got.CompletedAt != nil, "completed_at is set exactly when the state is terminal")
				require.Len(t, after, len(before)+1, "one event, in the same transaction")
				ev := after[len(after)-1]
				assert.Equal(t, models.EventStateChanged, ev.Type)
				if assert.NotNil(t, ev.FromState) && assert.NotNil(t, ev.ToState) {
					assert.Equal(t, [2]models.State{from, to}, [2]models.State{*ev.FromState, *ev.ToState})
				}

				stale := *got
				stale.State = from
				err = l.TransitionForTest(ctx, &stale, from, to, 0)
				assert.Equal(t, models.CodeStale, models.ErrorCode(err), "the same write again: someone else decided first")
				assert.Len(t, events(t, l, op), len(after), "a refused write records nothing")
			})
		}
	})
}

// TestCreationEntersSpec2States: new → PENDING | AWAITING_APPROVAL, or straight to RUNNING
// when the request claims it; the created event says which.
func TestCreationEntersSpec2States(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		l, c := setup(t, d)
		ctx := context.Background()
		for want, shape := range map[models.State]func(*models.NewOperation){
			models.StatePending:          func(*models.NewOperation) {},
			models.StateAwaitingApproval: func(in *models.NewOperation) { in.NeedsApproval = true },
			models.StateRunning:          func(in *models.NewOperation) { in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute} },
		} {
			in := newOp(c, "new-"+string(want))
			shape(&in)
			s, err := l.Submit(ctx, in)
			require.NoError(t, err)
			require.True(t, s.Created)
			assert.Equal(t, want, s.Op.State)
			evs := events(t, l, s.Op)
			require.NotEmpty(t, evs)
			assert.Equal(t, models.EventCreated, evs[0].Type)
			assert.Nil(t, evs[0].FromState, "created from nothing")
			if assert.NotNil(t, evs[0].ToState) {
				assert.Equal(t, want, *evs[0].ToState)
			}
		}
	})
}

// operationIn records an operation and puts it in state from, as the test's starting point.
func operationIn(t *testing.T, l *models.Ledger, c *models.Caller, key string, from models.State) *models.Operation {
	t.Helper()
	ctx := context.Background()
	s, err := l.Submit(ctx, newOp(c, key))
	require.NoError(t, err)
	require.NoError(t, l.DB().Model(&models.Operation{}).Where("id = ?", s.Op.ID).Update("state", from).Error)
	op, err := l.Get(ctx, c.Tenant, s.Op.ID)
	require.NoError(t, err)
	require.Equal(t, from, op.State)
	return op
}

func events(t *testing.T, l *models.Ledger, op *models.Operation) []models.Event {
	t.Helper()
	evs, err := l.Events(context.Background(), op.Tenant, op.ID)
	require.NoError(t, err)
	return evs
}
