package models_test

import (
	"context"
	"testing"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/testdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSavedViews(t *testing.T) {
	testdb.Each(t, func(t *testing.T, d models.Dialect) {
		t.Parallel()
		ctx := context.Background()
		l := testdb.Ledger(t, d)
		user := func(email string) string {
			u, err := l.CreateUser(ctx, models.AllTenants(), models.Requester{Actor: models.ActorCLI},
				models.NewUser{Email: email, Password: goodPassword, Role: models.RoleReviewer})
			require.NoError(t, err)
			return u.ID
		}
		ann, bob := user("ann@example.com"), user("bob@example.com")

		v, err := l.SaveView(ctx, ann, models.ViewPageOperations, "  Refunds stuck ",
			"tool=refunds.issue&csrf_token=secret&state=UNKNOWN&before=op_X&key=")
		require.NoError(t, err)
		assert.Equal(t, "Refunds stuck", v.Name)
		assert.Equal(t, "state=UNKNOWN&tool=refunds.issue", v.Query, "sorted; no CSRF token, cursor or empty value")

		_, err = l.SaveView(ctx, ann, models.ViewPageOperations, "Refunds stuck", "state=FAILED_FINAL")
		assert.Equal(t, models.CodeConflict, models.ErrorCode(err), "one name per owner and page")
		_, err = l.SaveView(ctx, ann, models.ViewPageReviews, "Refunds stuck", "tool=refunds.issue")
		require.NoError(t, err, "the same name on the other page")
		_, err = l.SaveView(ctx, bob, models.ViewPageOperations, "Refunds stuck", "")
		require.NoError(t, err, "the same name for another user")
		for name, page := range map[string]string{"": models.ViewPageOperations, "x": "dashboard"} {
			_, err = l.SaveView(ctx, ann, page, name, "")
			assert.Equal(t, models.CodeInvalid, models.ErrorCode(err), "name %q page %q", name, page)
		}

		mine, err := l.SavedViews(ctx, ann, models.ViewPageOperations)
		require.NoError(t, err)
		require.Len(t, mine, 1, "a user lists only their own views of the page")
		assert.Equal(t, v.ID, mine[0].ID)

		shared, err := l.SavedView(ctx, v.ID)
		require.NoError(t, err, "anyone may open a view by its id")
		assert.Equal(t, v.Query, shared.Query)

		_, err = l.DeleteView(ctx, bob, v.ID)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err), "only the owner deletes a view")
		_, err = l.SavedView(ctx, v.ID)
		require.NoError(t, err, "still there")
		_, err = l.DeleteView(ctx, ann, v.ID)
		require.NoError(t, err)
		_, err = l.SavedView(ctx, v.ID)
		assert.Equal(t, models.CodeNotFound, models.ErrorCode(err))
	})
}
