package models_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An attempt is over only when its request can no longer arrive (docs/STATES.md): the time
// its connection was reset is recorded on its event, and an UNKNOWN outcome's settle window
// counts from that abort when it is later than the recording (the worker's clock ahead of
// the ledger's), never from the attempt's start.
func TestUnknownOutcomeSettlesFromTheAbort(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		base, c := setup(t, d)
		now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
		l := models.New(models.Config{DB: base.DB(), Dialect: d, Now: func() time.Time { return now }})
		ctx := context.Background()
		for _, tc := range []struct {
			name    string
			aborted time.Time
			since   time.Time
		}{
			{"aborted after the ledger's now: settle counts from the abort", now.Add(1500*time.Millisecond + 300), now.Add(1500*time.Millisecond + 1000)},
			{"aborted before the recording: settle counts from the recording", now.Add(-2 * time.Second), now},
			{"nothing aborted (an answer came): settle counts from the recording", time.Time{}, now},
		} {
			t.Run(tc.name, func(t *testing.T) {
				in := newOp(c, "settle-"+tc.name)
				in.Claim = &models.ClaimSpec{Worker: "w1", LeaseFor: time.Minute}
				s, err := l.Submit(ctx, in)
				require.NoError(t, err)
				require.NoError(t, l.FinishAttempt(ctx, models.Claimed{Op: s.Op, Attempt: s.Attempt}, "w1", models.AttemptOutcome{
					Class: models.ErrorAmbiguous, To: models.StateUnknown, ErrorClass: models.ErrorAmbiguous,
					ErrorMessage: "timeout", AbortedAt: tc.aborted}))
				got, err := l.Get(ctx, c.Tenant, s.Op.ID)
				require.NoError(t, err)
				require.Equal(t, models.StateUnknown, got.State)
				require.NotNil(t, got.UnknownSince)
				assert.True(t, tc.since.Equal(*got.UnknownSince), "unknown_since %s, want %s (rounded up to the microsecond)", got.UnknownSince, tc.since)

				evs, err := l.Events(ctx, c.Tenant, s.Op.ID)
				require.NoError(t, err)
				var recorded string
				for _, ev := range evs {
					if ev.Type == models.EventAttemptFinished && ev.Detail != nil {
						var detail map[string]any
						require.NoError(t, json.Unmarshal([]byte(*ev.Detail), &detail))
						recorded, _ = detail["aborted_at"].(string)
					}
				}
				if tc.aborted.IsZero() {
					assert.Empty(t, recorded)
				} else {
					assert.Equal(t, tc.aborted.Format(time.RFC3339Nano), recorded, "the abort is recorded with the attempt")
				}
			})
		}
	})
}
