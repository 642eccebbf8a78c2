package models_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Review email reaches only people who can act on it (issue 47, finding 7): an invited user who
// has not accepted gets none; one disabled after an email was written gets it never (it ends
// dead when the mailer would send it); and past EmailsPerHour in an hour a person's reviews
// fold into their hourly digest, so a loop of reviews cannot flood an inbox. Both engines.
func TestReviewEmailOnlyToWhoCanActAndCapped(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Hour).Add(5 * time.Minute)
		cat, err := catalog.Load([]byte(webhookTools))
		require.NoError(t, err)
		l := models.New(models.Config{DB: testdb.Open(t, d), Dialect: d, Mail: true, Now: func() time.Time { return now }, Payloads: opview.Payloads(cat)})
		caller := agentOf(ctx, t, l)
		cli := models.Requester{Actor: models.ActorCLI}
		for _, email := range []string{"rita@example.com", "dora@example.com"} {
			_, err := l.CreateUser(ctx, models.AllTenants(), cli, models.NewUser{Email: email, Password: "a long enough password", Role: models.RoleReviewer})
			require.NoError(t, err)
		}
		_, _, err = l.InviteUser(ctx, models.AllTenants(), cli, models.NewUser{Email: "ivan@example.com", Role: models.RoleReviewer})
		require.NoError(t, err)

		reviews := models.EmailsPerHour + 5
		for i := range reviews {
			r := running(t, l, caller, fmt.Sprintf("op-%d", i))
			require.NoError(t, l.FinishAttempt(ctx, r, "w1", models.AttemptOutcome{Class: models.ErrorAmbiguous, To: models.StateUnknown,
				ErrorClass: models.ErrorAmbiguous, ErrorMessage: "timeout"}))
			op, err := l.Get(ctx, caller.Tenant, r.Op.ID)
			require.NoError(t, err)
			_, err = l.OpenReview(ctx, op, models.ReasonUnknownOutcome, "worker:w1")
			require.NoError(t, err)
		}
		var rows []models.Email
		require.NoError(t, l.DB().Order("created_at, id").Find(&rows).Error)
		single, digest := map[string]int{}, map[string]int{}
		for _, e := range rows {
			if e.Digest {
				digest[e.Recipient]++
				assert.Equal(t, models.NextDigest(now), e.NextAttemptAt.UTC(), "folded into the next hourly digest")
			} else {
				single[e.Recipient]++
			}
		}
		assert.Equal(t, map[string]int{"rita@example.com": models.EmailsPerHour, "dora@example.com": models.EmailsPerHour}, single)
		assert.Equal(t, map[string]int{"rita@example.com": 5, "dora@example.com": 5}, digest)

		dora, err := l.UserByEmail(ctx, "dora@example.com")
		require.NoError(t, err)
		yes := true
		_, err = l.ChangeUser(ctx, models.AllTenants(), cli, dora.ID, models.UserChange{Disable: &yes})
		require.NoError(t, err)
		now = models.NextDigest(now).Add(time.Minute)
		claimed, err := l.ClaimEmails(ctx, "m1", 100, time.Minute)
		require.NoError(t, err)
		to := map[string]int{}
		for _, e := range claimed {
			to[e.Recipient]++
		}
		assert.Equal(t, map[string]int{"rita@example.com": reviews}, to, "nothing for the disabled user, nothing for the invited one")
		var dead int64
		require.NoError(t, l.DB().Model(&models.Email{}).Where("recipient = ? AND status = ?", "dora@example.com", models.EmailDead).Count(&dead).Error)
		assert.Equal(t, int64(reviews), dead)
	})
}
