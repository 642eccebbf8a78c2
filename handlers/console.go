package handlers

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/a-h/templ"
	"github.com/idemgate/idemgate/handlers/sso"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// Console serves the review console's pages (docs/CONSOLE.md). The web layer resolves the session
// and checks CSRF tokens, roles and sign-in before these handlers run; they read the
// signed-in user from the request context and pass the user's scope to every ledger read.
type Console struct {
	Ledger   *models.Ledger
	Catalog  *catalog.Catalog
	Sessions Sessions
	// Executor builds compensations that reviewers propose; nil refuses proposals.
	Executor *jobs.Executor
	// Log receives what cannot be shown to the user, such as an audit entry that could not be
	// written.
	Log *slog.Logger
	// Limits bound failed sign-ins.
	Limits models.LoginLimits
	// Refusals records the refusals anyone can cause (failed sign-ins, forbidden pages)
	// within a budget; nil records none.
	Refusals *RefusalBudget
	// Now is the clock pages measure ages against.
	Now func() time.Time
	// RefreshEvery is how often the review queue reloads its list (default 15 s).
	RefreshEvery time.Duration
	// ApprovalWarning is how long before an approval lapses the queue marks it (serve
	// --approval-warning; default jobs.DefaultApprovalWarning; negative marks none).
	ApprovalWarning time.Duration
	// ClaimTTL is how long a reviewer's claim on a review lasts (default models.DefaultClaimTTL).
	ClaimTTL time.Duration
	// SSO signs people in through an OpenID Connect provider; nil offers passwords only.
	SSO *sso.Provider
	// Mail says reviewers are emailed about reviews; the queue then offers to mute them.
	Mail bool
}

// Sessions starts and ends console sessions and carries one-time messages between a POST
// and the page it redirects to. The web layer implements it over its session cookie.
type Sessions interface {
	// SignIn starts a new session of u, replacing whatever session the browser had (new
	// token, new CSRF token), so that a session fixed before sign-in is worthless after.
	SignIn(c echo.Context, u *models.User) error
	// SignOut ends the browser's session for good.
	SignOut(c echo.Context) error
	// SetFlash keeps f for the next page the browser asks for.
	SetFlash(c echo.Context, f Flash)
	// TakeFlash returns and forgets the kept flash; ok is false when there is none.
	TakeFlash(c echo.Context) (f Flash, ok bool)
	// SetPendingSSO keeps a sign-in at the identity provider until its callback.
	SetPendingSSO(c echo.Context, p sso.Pending)
	// TakePendingSSO returns and forgets the pending sign-in; ok is false when there is none.
	TakePendingSSO(c echo.Context) (p sso.Pending, ok bool)
}

// Flash is a one-time message shown after a redirect. Secret, when set, is a credential shown
// this once (a new API key); it travels only inside the encrypted session cookie.
type Flash struct {
	Kind      string `json:"kind"`
	Message   string `json:"message"`
	Tenant    string `json:"tenant,omitempty"`
	Principal string `json:"principal,omitempty"`
	Tools     string `json:"tools,omitempty"`
	Secret    string `json:"secret,omitempty"`
	// Invite is a new user's invite link, shown this once.
	Invite string `json:"invite,omitempty"`
	// NextHref and NextText lead on from a review decision to the next review.
	NextHref string `json:"next_href,omitempty"`
	NextText string `json:"next_text,omitempty"`
	// Refused names a review action the ledger refused, whose form opens again on the page the
	// redirect leads to, with what was typed (Input) and why (Why).
	Refused string            `json:"refused,omitempty"`
	Input   views.ActionInput `json:"input,omitempty"`
	Why     string            `json:"why,omitempty"`
}

// BackgroundHeader marks requests a page makes by itself (the review queue's refresh, the
// operation page's live update): they do not count as activity, so an unattended page still
// signs out after the idle timeout, and they take no one-time message meant for the person.
const BackgroundHeader = "X-Idemgate-Background"

// inBackground says whether the request was made by a page by itself (BackgroundHeader).
func inBackground(c echo.Context) bool {
	return c.Request().Header.Get(BackgroundHeader) != ""
}

// takeFlash takes the one-time message waiting for the person, unless the page asks by
// itself (its live update): the message stays for the person's own next page.
func (h *Console) takeFlash(c echo.Context) (Flash, bool) {
	if inBackground(c) {
		return Flash{}, false
	}
	return h.Sessions.TakeFlash(c)
}

// Viewer is the signed-in console user.
type Viewer struct {
	ID        string
	Email     string
	Role      models.Role
	Scope     models.Scope
	CSRFToken string
}

// Actor is how the viewer appears on timelines and in the audit log, for people to read.
func (v *Viewer) Actor() string { return "user:" + v.Email }

// Person is who the viewer is, by their stable user id: what four eyes, approvals, claims and
// bulk decisions compare (an email can change at the next sign-in).
func (v *Viewer) Person() models.Person { return models.Person{UserID: v.ID, Actor: v.Actor()} }

// OneTenant says whether v sees exactly one tenant: a list's tenant column then tells them
// nothing, and is left out.
func (v *Viewer) OneTenant() bool { return !v.Scope.Unlimited() && len(v.Scope.Tenants()) == 1 }

// Requester is the viewer asking for a change in request c, for its audit entry.
func (v *Viewer) Requester(c echo.Context) models.Requester {
	return models.Requester{Actor: v.Actor(), UserID: v.ID, RequestID: c.Response().Header().Get(echo.HeaderXRequestID)}
}

type viewerKey struct{}
type csrfKey struct{}

// WithViewer returns ctx carrying the signed-in user; the web layer sets it.
func WithViewer(ctx context.Context, v *Viewer) context.Context {
	return context.WithValue(ctx, viewerKey{}, v)
}

// ViewerFrom returns the signed-in user of the request, or nil.
func ViewerFrom(ctx context.Context) *Viewer {
	v, _ := ctx.Value(viewerKey{}).(*Viewer)
	return v
}

// WithCSRFToken returns ctx carrying the session's CSRF token, for forms shown before sign-in.
func WithCSRFToken(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, csrfKey{}, token)
}

// CSRFTokenFrom returns the session's CSRF token of the request.
func CSRFTokenFrom(ctx context.Context) string {
	t, _ := ctx.Value(csrfKey{}).(string)
	return t
}

// currentViewer returns the signed-in user. The routes guarantee one; a missing one is a wiring bug,
// answered as "not signed in" rather than a panic.
func currentViewer(c echo.Context) (*Viewer, error) {
	v := ViewerFrom(c.Request().Context())
	if v == nil {
		return nil, echo.NewHTTPError(http.StatusUnauthorized, "Sign in to continue.")
	}
	return v, nil
}

// layoutPage is the layout's view of the request for a signed-in page in section nav.
// ErrorLayout is the layout of an error page for the request's signed-in person, with their
// menu; ok is false when nobody is signed in (the signed-out layout is used). It reads
// nothing, so it is safe whatever failed.
func ErrorLayout(ctx context.Context, title string) (views.Page, bool) {
	v := ViewerFrom(ctx)
	if v == nil {
		return views.Page{}, false
	}
	return layoutPage(v, title, ""), true
}

func layoutPage(v *Viewer, title, nav string) views.Page {
	return views.Page{Title: title, User: &views.User{Email: v.Email, Role: string(v.Role)}, CSRFToken: v.CSRFToken, Nav: nav}
}

// page is the layout's view of the request, with the count of open reviews the navigation
// shows. A count that cannot be read is left out rather than failing the page.
func (h *Console) page(c echo.Context, v *Viewer, title, nav string) views.Page {
	p := layoutPage(v, title, nav)
	if n, err := h.Ledger.OpenReviewCount(c.Request().Context(), v.Scope); err == nil {
		p.OpenReviews = n
	}
	return p
}

// renderPage writes a console page. Console pages show money and credentials: no cache may keep
// them.
func renderPage(c echo.Context, status int, comp templ.Component) error {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(status)
	return comp.Render(c.Request().Context(), c.Response())
}

func (h *Console) now() time.Time {
	if h.Now == nil {
		return time.Now()
	}
	return h.Now()
}
