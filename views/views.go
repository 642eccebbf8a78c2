// Package views holds the templ components of idemgate's server-rendered pages: the layout every
// page shares, the problem-type pages the API's errors link to, the console's error page, and
// small components such as state badges and notices.
//
// Pages take view-model structs, never database models. Markup carries no inline script or style
// (the console runs under Content-Security-Policy default-src 'self'), links its stylesheet
// through package static, and puts data-testid attributes on what tests look for.
package views

import (
	"slices"
	"strconv"
)

// Page is what the layout needs to know about the request a page answers.
type Page struct {
	// Title names the page; the layout appends the product name.
	Title string
	// User is the signed-in user, or nil when signed out. Navigation and the sign-out form
	// appear only for a signed-in user.
	User *User
	// CSRFToken is sent with the sign-out form as the hidden field csrf_token.
	CSRFToken string
	// Nav names the active section, one of the Nav constants, or "" for none.
	Nav string
	// OpenReviews is how many reviews wait within the user's tenants, shown in the navigation
	// and the tab's title; 0 shows none.
	OpenReviews int64
	// Scripts names embedded scripts (static files) the page loads, deferred. Pages work
	// without them; they only enhance, such as the review queue's auto-refresh.
	Scripts []string
}

// User is the signed-in user as the layout shows them.
type User struct {
	Email string
	Role  string
}

// The roles the navigation tells apart: admins see Admin, auditors and admins the audit log
// and exports.
const (
	RoleAdmin   = "admin"
	RoleAuditor = "auditor"
)

// IsAdmin reports whether the user is an admin. A nil user is not.
func (u *User) IsAdmin() bool { return u != nil && u.Role == RoleAdmin }

// The console's sections, as named by Page.Nav.
const (
	NavDashboard  = "dashboard"
	NavReviews    = "reviews"
	NavOperations = "operations"
	NavAudit      = "audit"
	NavExports    = "exports"
	NavAdmin      = "admin"
)

// navItem is one link of the main navigation.
type navItem struct {
	Section string
	Label   string
	Href    string
	// Roles lists the roles that see the link; nil means every role.
	Roles []string
}

// navItems lists the main navigation in the order it is shown.
var navItems = []navItem{
	{Section: NavDashboard, Label: "Dashboard", Href: "/"},
	{Section: NavReviews, Label: "Reviews", Href: "/reviews"},
	{Section: NavOperations, Label: "Operations", Href: "/operations"},
	{Section: NavAudit, Label: "Audit", Href: "/audit", Roles: []string{RoleAuditor, RoleAdmin}},
	{Section: NavExports, Label: "Exports", Href: "/exports", Roles: []string{RoleAuditor, RoleAdmin}},
	{Section: NavAdmin, Label: "Admin", Href: "/admin", Roles: []string{RoleAdmin}},
}

// visibleNav returns the navigation links the user may see.
func visibleNav(u *User) []navItem {
	out := make([]navItem, 0, len(navItems))
	for _, it := range navItems {
		if it.Roles != nil && (u == nil || !slices.Contains(it.Roles, u.Role)) {
			continue
		}
		out = append(out, it)
	}
	return out
}

// productName is shown in the header and appended to every page title.
const productName = "idemgate"

// documentTitle is the text of the page's <title> element: with open reviews, their count
// first, so a tab in the background says when something waits.
func documentTitle(p Page) string {
	t := productName
	if p.Title != "" {
		t = p.Title + " · " + productName
	}
	if p.User != nil && p.OpenReviews > 0 {
		t = "(" + strconv.FormatInt(p.OpenReviews, 10) + ") " + t
	}
	return t
}
