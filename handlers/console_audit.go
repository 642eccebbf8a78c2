package handlers

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// auditPageSize is how many entries the audit page lists.
const auditPageSize = 50

// auditActions are suggested in the audit page's action filter: the families first, then the
// actions people look for most.
var auditActions = []string{"review", "console", "export", "apikey", "tenant", "user", "webhook",
	"review.approve", "review.reject", "review.confirm_succeeded", "review.confirm_not_executed", "review.mark_failed",
	"review.reconcile_now", models.AuditProposeCompensation, models.AuditLoginFailed, models.AuditCSRFRefused,
	models.AuditForbidden, "export.created"}

// AuditLog shows the audit chain's head and last verification, and its entries within the
// viewer's tenants, newest first, filtered by tenant, action and actor.
func (h *Console) AuditLog(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	q := c.QueryParams()
	f := models.AuditSearch{Tenant: q.Get("tenant"), Action: strings.TrimSpace(q.Get("action")),
		Actor: strings.TrimSpace(q.Get("actor")), Limit: auditPageSize}
	f.Before, _ = strconv.ParseInt(q.Get("before"), 10, 64)
	p := views.AuditPage{Page: h.page(c, v, "Audit log", views.NavAudit), Limited: !v.Scope.Unlimited(),
		Action: f.Action, Actor: f.Actor, Actions: auditActions, Filtered: f.Tenant != "" || f.Action != "" || f.Actor != ""}
	if fl, ok := h.takeFlash(c); ok {
		p.Notice = &views.NoticeText{Kind: views.NoticeKind(fl.Kind), Message: fl.Message}
		if fl.Kind == string(views.NoticeError) {
			p.Broken, p.Notice = fl.Message, nil
		}
	}
	head, err := h.chainFacts(c, &p)
	if err != nil {
		return err
	}
	tenants, err := h.Ledger.ScopedTenants(ctx, v.Scope)
	if err != nil {
		return err
	}
	p.Tenants = options(tenantNames(tenants), f.Tenant)
	entries, more, err := h.Ledger.AuditEntries(ctx, v.Scope, f)
	if err != nil {
		return err
	}
	if p.Rows, err = h.auditRows(c, v, entries); err != nil {
		return err
	}
	newest := int64(0)
	if len(entries) > 0 {
		newest = entries[0].Seq
	}
	p.HeadNote = headNote(head, newest, f.Before != 0, p.Filtered, p.Limited)
	if more && len(entries) > 0 {
		next := url.Values{}
		for k, vs := range q {
			next[k] = vs
		}
		next.Set("before", strconv.FormatInt(entries[len(entries)-1].Seq, 10))
		p.NextHref = "/audit?" + next.Encode()
	}
	return renderPage(c, http.StatusOK, views.AuditLog(p))
}

// chainFacts fills the page's chain head and last verification, and returns the head's number.
func (h *Console) chainFacts(c echo.Context, p *views.AuditPage) (int64, error) {
	ctx := c.Request().Context()
	seq, hash, err := h.Ledger.AuditHead(ctx)
	if err != nil {
		return 0, err
	}
	p.HeadSeq, p.HeadHash = strconv.FormatInt(seq, 10), hash
	cp, ok, err := h.Ledger.LastAuditVerification(ctx)
	if err != nil {
		return 0, err
	}
	if ok {
		p.Verified = &views.AuditVerification{Seq: strconv.FormatInt(cp.Seq, 10), Hash: cp.Hash, At: views.NewTime(cp.At, h.now()),
			Since: strconv.FormatInt(max(seq-cp.Seq, 0), 10)}
	}
	return seq, nil
}

// auditRows are the entries as the audit page lists them, each operation named by its key
// (read for the page at once): an op_ id alone says nothing to the person reading.
func (h *Console) auditRows(c echo.Context, v *Viewer, entries []models.AuditEntry) ([]views.AuditRow, error) {
	var ids []string
	for _, e := range entries {
		if e.OperationID != "" {
			ids = append(ids, e.OperationID)
		}
	}
	keys, err := h.Ledger.KeysOf(c.Request().Context(), v.Scope, slices.Compact(slices.Sorted(slices.Values(ids))))
	if err != nil {
		return nil, err
	}
	rows := make([]views.AuditRow, len(entries))
	for i, e := range entries {
		rows[i] = auditRow(e)
		rows[i].OperationKey = keys[e.OperationID]
	}
	return rows, nil
}

// headNote says, in one sentence, why the chain's head is past the newest entry listed
// (newest, 0 when none is): the list is an older page, filtered, or limited to the viewer's
// tenants. "" when the list starts at the head.
func headNote(head, newest int64, paged, filtered, limited bool) string {
	h := strconv.FormatInt(head, 10)
	switch {
	case head == 0 || newest >= head:
		return ""
	case paged:
		return "This page lists older entries; the head, entry " + h + ", is on the first page."
	case filtered && newest == 0:
		return "The head is entry " + h + "; no entry matches the filters."
	case filtered:
		return "The head is entry " + h + "; the newest entry that matches the filters is " + strconv.FormatInt(newest, 10) + "."
	case limited && newest == 0:
		return "The head is entry " + h + "; every entry so far belongs to other tenants or to none (such as sign-ins), which you do not see."
	case limited:
		return "The head is entry " + h + "; the entries after " + strconv.FormatInt(newest, 10) +
			" belong to other tenants or to none (such as sign-ins), which you do not see."
	}
	return "" // appended while the page was read: the next visit lists it
}

// VerifyAudit recomputes the whole chain now and reports on the audit page whether it holds or
// which entry is the first that does not. It changes nothing.
func (h *Console) VerifyAudit(c echo.Context) error {
	cp, err := h.Ledger.VerifyAuditChain(c.Request().Context())
	var broken *models.ChainBreak
	switch {
	case errors.As(err, &broken):
		h.Sessions.SetFlash(c, Flash{Kind: string(views.NoticeError), Message: "The chain is broken at entry " +
			strconv.FormatInt(broken.Seq, 10) + ": " + broken.Reason + ". Entries from there on cannot be trusted; keep this page and tell whoever runs the database."})
	case err != nil:
		return err
	default:
		h.Sessions.SetFlash(c, Flash{Kind: string(views.NoticeSuccess), Message: "The chain holds: entries 1 to " +
			strconv.FormatInt(cp.Seq, 10) + " match their hashes and follow each other unbroken."})
	}
	return c.Redirect(http.StatusSeeOther, "/audit")
}

// auditRow is an entry as the console shows it, on the audit page and on its operation's.
func auditRow(e models.AuditEntry) views.AuditRow {
	r := views.AuditRow{Seq: strconv.FormatInt(e.Seq, 10), At: views.NewPreciseTime(e.At), Actor: models.ActorName(e.Actor), Action: e.Action,
		Tenant: e.Tenant, OperationID: e.OperationID, Outcome: e.Outcome, RequestID: e.RequestID, Hash: e.Hash}
	if e.OperationID != "" {
		r.OperationHref = OperationHref(e.OperationID)
	}
	if e.Detail != "" {
		r.Detail = details(&e.Detail)
	}
	if e.RequestID != "" {
		r.Detail = append(r.Detail, views.Detail{Name: "request id", Value: e.RequestID})
	}
	return r
}

// hiddenDetails are detail members that mean nothing to a reader of the audit page (the
// fencing token) or are shown elsewhere.
var hiddenDetails = map[string]bool{"fence": true}

// details lists an audit entry's detail members by name.
func details(raw *string) []views.Detail {
	d := detailMap(raw)
	names := make([]string, 0, len(d))
	for k := range d {
		if !hiddenDetails[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	out := make([]views.Detail, len(names))
	for i, k := range names {
		out[i] = views.Detail{Name: k, Value: str(d[k])}
	}
	return out
}
