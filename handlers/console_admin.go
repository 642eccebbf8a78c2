package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// The admin pages (admins only; the routes check the role). Every change answers with a
// redirect back to /admin (post/redirect/get), so reloading the page never repeats it; its
// outcome travels in the session's flash, and a new API key's secret only there.

// Admin shows tenants, API keys and users within the admin's scope.
func (h *Console) Admin(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	tenants, err := h.Ledger.ScopedTenants(ctx, v.Scope)
	if err != nil {
		return err
	}
	keys, err := h.Ledger.APIKeys(ctx, v.Scope, "")
	if err != nil {
		return err
	}
	users, err := h.Ledger.Users(ctx, v.Scope)
	if err != nil {
		return err
	}
	now := h.now()
	p := views.AdminPage{Page: h.page(c, v, "Admin", views.NavAdmin), MayCreateTenants: v.Scope.Unlimited(),
		TenantOptions: options(tenantNames(tenants), ""), Roles: roleOptions()}
	if f, ok := h.takeFlash(c); ok {
		p.Notice = &views.NoticeText{Kind: views.NoticeKind(f.Kind), Message: f.Message}
		if f.Secret != "" {
			p.NewKey = &views.NewKeyInfo{Tenant: f.Tenant, Principal: f.Principal, Tools: f.Tools, Secret: f.Secret}
			p.Notice = nil
		}
		p.InviteLink = f.Invite
	}
	for _, t := range tenants {
		p.Tenants = append(p.Tenants, views.TenantRow{Name: t.Name, Created: views.NewTime(t.CreatedAt, now)})
	}
	for _, k := range keys {
		p.Keys = append(p.Keys, views.KeyRow{ID: k.ID, Tenant: k.Tenant, Prefix: k.Prefix, Principal: k.PrincipalName,
			Tools: k.Tools, Created: views.NewTime(k.CreatedAt, now), Revoked: timePtr(k.RevokedAt, now),
			LastUsed: timePtr(k.LastUsedAt, now)})
	}
	for _, u := range users {
		p.Users = append(p.Users, views.UserRow{Email: u.Email, Role: string(u.Role), Tenants: tenantsText(u.TenantList()),
			Created: views.NewTime(u.CreatedAt, now), Disabled: u.DisabledAt != nil, ID: u.ID})
	}
	return renderPage(c, http.StatusOK, views.Admin(p))
}

// CreateTenant creates a tenant. Only an admin of every tenant may: a tenant admin could not
// see the new tenant.
func (h *Console) CreateTenant(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	if !v.Scope.Unlimited() {
		return h.forbid(c, v, "Only an admin of every tenant can create tenants.")
	}
	t, err := h.Ledger.CreateTenant(c.Request().Context(), v.Scope, requester(c, v), strings.TrimSpace(c.FormValue("name")))
	return h.adminDone(c, err, "Tenant "+tenantName(t)+" created.", "#tenants")
}

// CreateAPIKey creates an API key of a tenant within the admin's scope; the secret is shown
// once, on the page the redirect leads to.
func (h *Console) CreateAPIKey(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	tenant := c.FormValue("tenant")
	if !v.Scope.Allows(tenant) {
		return echo.NewHTTPError(http.StatusNotFound, "No such tenant.")
	}
	var tools []string
	if list := strings.TrimSpace(c.FormValue("tools")); list != "" && list != "*" {
		tools = strings.Split(list, ",")
	}
	// A key for a tool the catalogue lacks would be refused on every call: say so now.
	for _, name := range tools {
		if _, ok := h.Catalog.Get(strings.TrimSpace(name)); !ok {
			return h.adminDone(c, &models.Error{Code: models.CodeInvalid, Message: fmt.Sprintf("the catalogue has no tool %q; choose from %s",
				strings.TrimSpace(name), strings.Join(h.Catalog.Names(), ", "))}, "", "#keys")
		}
	}
	principal := strings.TrimSpace(c.FormValue("principal"))
	k, err := h.Ledger.CreateAPIKey(c.Request().Context(), v.Scope, requester(c, v), tenant, principal, tools)
	if err != nil {
		return h.adminDone(c, err, "", "#keys")
	}
	h.Sessions.SetFlash(c, Flash{Kind: string(views.NoticeSuccess), Message: "API key created.",
		Tenant: k.Key.Tenant, Principal: principal, Tools: k.Key.Tools, Secret: k.Secret})
	return c.Redirect(http.StatusSeeOther, "/admin#keys")
}

// RevokeAPIKey revokes an API key within the admin's scope.
func (h *Console) RevokeAPIKey(c echo.Context) error {
	return removeByID(h, c, "/admin#keys", h.Ledger.RevokeAPIKeyByID, func(k *models.APIKey) string {
		return "API key " + k.Prefix + "… of " + k.Tenant + " revoked. Agents using it are refused from now on."
	})
}

// removeByID ends the record the path's :id names (a revoke, a delete) within the admin's
// scope and returns to the page at to with what happened. A record outside the scope is 404,
// as a missing one; any other refusal is a notice on the page.
func removeByID[T any](h *Console, c echo.Context, to string,
	remove func(context.Context, models.Scope, models.Requester, string) (*T, error), said func(*T) string) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	r, err := remove(c.Request().Context(), v.Scope, requester(c, v), c.Param("id"))
	if models.ErrorCode(err) == models.CodeNotFound {
		return err
	}
	msg := ""
	if r != nil {
		msg = said(r)
	}
	return h.formDone(c, err, msg, to)
}

// CreateUser creates a console user. A tenant admin may only create users limited to some of
// their own tenants, so that nobody can grant more than they hold.
func (h *Console) CreateUser(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	in := models.NewUser{Email: c.FormValue("email"), Password: c.FormValue("password"),
		Role: models.Role(c.FormValue("role")), Tenants: splitList(c.FormValue("tenants"))}
	every := c.FormValue("all_tenants") == "1"
	switch {
	case every && !v.Scope.Unlimited():
		return h.forbid(c, v, "You can only create users limited to your own tenants.")
	case every && len(in.Tenants) > 0:
		return h.adminDone(c, &models.Error{Code: models.CodeInvalid, Message: "choose either some tenants or every tenant, not both"}, "", "#users")
	case !every && len(in.Tenants) == 0:
		// An empty field used to mean every tenant: the widest grant was the one made by
		// typing nothing. Every tenant is now a choice of its own.
		return h.adminDone(c, &models.Error{Code: models.CodeInvalid,
			Message: "name the tenants this person may see, or choose every tenant"}, "", "#users")
	case !v.Scope.Unlimited() && !v.Scope.Covers(in.Tenants):
		return h.forbid(c, v, "You can only create users limited to your own tenants.")
	}
	if in.Password == "" {
		u, token, err := h.Ledger.InviteUser(c.Request().Context(), v.Scope, requester(c, v), in)
		if err != nil {
			return h.adminDone(c, err, "", "#users")
		}
		h.Sessions.SetFlash(c, Flash{Kind: string(views.NoticeSuccess), Invite: inviteLink(h.Ledger.PublicURL(), c.Request(), token),
			Message: "User " + u.Email + " (" + string(u.Role) + ", " + tenantsText(u.TenantList()) + ") invited: they choose their password through the link below."})
		return c.Redirect(http.StatusSeeOther, "/admin#users")
	}
	u, err := h.Ledger.CreateUser(c.Request().Context(), v.Scope, requester(c, v), in)
	msg := ""
	if u != nil {
		msg = "User " + u.Email + " (" + string(u.Role) + ", " + tenantsText(u.TenantList()) + ") created."
	}
	return h.adminDone(c, err, msg, "#users")
}

// ChangeUser disables or enables a user, changes their role or sets a new password (the
// form's change: disable, enable, role, password), within the admin's scope.
func (h *Console) ChangeUser(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	var ch models.UserChange
	var done string
	switch c.Param("change") {
	case "disable":
		yes := true
		ch.Disable, done = &yes, "disabled; their sessions ended"
	case "enable":
		no := false
		ch.Disable, done = &no, "enabled"
	case "role":
		ch.Role = models.Role(c.FormValue("role"))
		done = "is now " + string(ch.Role)
	case "password":
		ch.Password, done = c.FormValue("password"), "has a new password; their sessions ended"
	default:
		return echo.ErrNotFound
	}
	u, err := h.Ledger.ChangeUser(c.Request().Context(), v.Scope, requester(c, v), c.Param("id"), ch)
	msg := ""
	if u != nil {
		msg = "User " + u.Email + " " + done + "."
	}
	return h.adminDone(c, err, msg, "#users")
}

// adminDone redirects back to the admin page with the outcome (see formDone).
func (h *Console) adminDone(c echo.Context, err error, success, anchor string) error {
	return h.formDone(c, err, success, "/admin"+anchor)
}

// formDone redirects back to the page a form was posted from, at to, with the outcome: a
// success, or the ledger's refusal of the input (AnswerFor), as a notice. Any other error is
// answered with the error page.
func (h *Console) formDone(c echo.Context, err error, success, to string) error {
	switch {
	case err == nil:
		h.Sessions.SetFlash(c, Flash{Kind: string(views.NoticeSuccess), Message: success})
	case AnswerFor(err).Refusal:
		h.Sessions.SetFlash(c, Flash{Kind: string(views.NoticeError), Message: "Nothing was changed: " + errDetail(err) + "."})
	default:
		return err
	}
	return c.Redirect(http.StatusSeeOther, to)
}

func roleOptions() []views.Option {
	out := make([]views.Option, len(models.Roles))
	for i, r := range models.Roles {
		out[i] = views.Option{Value: string(r), Label: string(r), Selected: r == models.RoleReviewer}
	}
	return out
}

func tenantsText(list []string) string {
	if len(list) == 0 {
		return "every tenant"
	}
	return strings.Join(list, ", ")
}

func tenantName(t *models.Tenant) string {
	if t == nil {
		return ""
	}
	return t.Name
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// inviteLink is the link an invited person opens: on --public-url, like every link idemgate
// gives out. Without one, the address the admin reached the console at, its scheme from the
// connection itself: never from X-Forwarded-Proto, which anyone in front may write.
func inviteLink(publicURL string, r *http.Request, token string) string {
	path := "/invite/" + url.PathEscape(token)
	if publicURL != "" {
		return publicURL + path
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + path
}
