package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// reviewsShown bounds the review queue's page.
const reviewsShown = 200

// defaultRefresh is how often the review queue reloads its list: often enough that two
// reviewers rarely pick the same review, rarely enough to cost nothing.
const defaultRefresh = 15 * time.Second

var reviewReasons = []string{models.ReasonUnknownOutcome, models.ReasonApprovalRequired, models.ReasonPolicy, models.ReasonCompensationApproval, models.ReasonManual}

// reasonLabels name review reasons as people read them.
var reasonLabels = map[string]string{
	models.ReasonUnknownOutcome:       "Outcome unknown",
	models.ReasonApprovalRequired:     "Needs approval",
	models.ReasonPolicy:               "Held by a policy",
	models.ReasonCompensationApproval: "Compensation needs approval",
	models.ReasonManual:               "Handed over by a person",
}

// reasonStates are the states review reasons imply: a queue row whose operation is in that
// state says why it waits once, by its state badge, not again in words.
var reasonStates = map[string]models.State{
	models.ReasonUnknownOutcome:       models.StateUnknown,
	models.ReasonApprovalRequired:     models.StateAwaitingApproval,
	models.ReasonPolicy:               models.StateAwaitingApproval,
	models.ReasonCompensationApproval: models.StateAwaitingApproval,
}

// reasonShort name review reasons in a queue row's few words; the full label is its title.
var reasonShort = map[string]string{
	models.ReasonUnknownOutcome:       "Outcome unknown",
	models.ReasonApprovalRequired:     "Approval",
	models.ReasonPolicy:               "Policy",
	models.ReasonCompensationApproval: "Undo approval",
	models.ReasonManual:               "Handed over",
}

// reasonLabel is the label of a review reason; an unknown reason shows as it is.
func reasonLabel(r string) string {
	if l, ok := reasonLabels[r]; ok {
		return l
	}
	return r
}

// Reviews shows the open reviews, oldest first or by amount (sort=), with filters by tenant,
// tool, reason and claim.
func (h *Console) Reviews(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	f, order := reviewFilter(c), reviewSort(c.QueryParam("sort"))
	list, err := h.reviewList(c, v, f, order)
	if err != nil {
		return err
	}
	tenants, err := h.Ledger.ScopedTenants(c.Request().Context(), v.Scope)
	if err != nil {
		return err
	}
	p := views.ReviewsPage{
		Page:    h.page(c, v, "Reviews", views.NavReviews),
		Tenants: options(tenantNames(tenants), f.Tenant),
		Tools:   options(h.Catalog.Names(), f.Tool),
		Reasons: reasonOptions(f.Reason),
		Claims:  claimOptions(f.Claims),
		Sorts:   sortOptions(order),
		List:    list,
		Bulk:    bulkBar(v, "reviews", reviewQuery(c.QueryParams()), len(list.Items), list.More),
	}
	p.Page.Scripts = []string{"console.js"}
	if p.Views, err = h.savedViews(c, v, models.ViewPageReviews, c.QueryParams()); err != nil {
		return err
	}
	if h.Mail && (v.Role == models.RoleReviewer || v.Role == models.RoleAdmin) {
		choice, err := h.Ledger.EmailChoice(c.Request().Context(), v.ID)
		if err != nil {
			return err
		}
		p.Email = &views.EmailChoice{Options: []views.Option{
			{Value: models.EmailEach, Label: "An email per review", Selected: choice == models.EmailEach},
			{Value: models.EmailDigest, Label: "One email an hour, with every review", Selected: choice == models.EmailDigest},
			{Value: models.EmailOff, Label: "No email", Selected: choice == models.EmailOff},
		}, CSRFToken: v.CSRFToken}
	}
	return renderPage(c, http.StatusOK, views.Reviews(p))
}

// SetEmail sets how the signed-in person is emailed about reviews, and returns to the queue.
func (h *Console) SetEmail(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	choice := c.FormValue("email")
	err = h.Ledger.SetEmailChoice(c.Request().Context(), v.ID, choice)
	msg := map[string]string{
		models.EmailEach:   "You will get an email when a review opens or an approval is about to lapse.",
		models.EmailDigest: "You will get one email an hour, with every review that opened or is about to lapse in it.",
		models.EmailOff:    "You will get no more email about reviews.",
	}[choice]
	return h.formDone(c, err, msg, "/reviews")
}

// ReviewList is the review queue's list alone, which console.js reloads in place.
func (h *Console) ReviewList(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	list, err := h.reviewList(c, v, reviewFilter(c), reviewSort(c.QueryParam("sort")))
	if err != nil {
		return err
	}
	return renderPage(c, http.StatusOK, views.ReviewListFragment(list))
}

// reviewList is the queue's list: the open reviews matching f, oldest first, then in order
// (reviewSorts) when it is another. The ledger returns at most reviewsShown of the oldest;
// another order sorts those.
func (h *Console) reviewList(c echo.Context, v *Viewer, f models.ReviewFilter, order string) (views.ReviewList, error) {
	f.Viewer = v.Person()
	items, more, err := h.Ledger.ReviewQueue(c.Request().Context(), v.Scope, f)
	if err != nil {
		return views.ReviewList{}, err
	}
	now := h.now()
	q := reviewQuery(url.Values{"tenant": {f.Tenant}, "tool": {f.Tool}, "reason": {f.Reason}, "claims": {f.Claims}})
	if order != sortWaiting {
		q.Set("sort", order)
	}
	every := h.RefreshEvery
	if every <= 0 {
		every = defaultRefresh
	}
	l := views.ReviewList{OneTenant: v.OneTenant(), More: more, Src: "/reviews/list?" + q.Encode(), RefreshMS: strconv.FormatInt(every.Milliseconds(), 10),
		Updated: views.NewTime(now, time.Time{}), CSRFToken: v.CSRFToken, CanClaim: v.Role != models.RoleAuditor, Pick: mayAct(v),
		BulkAll: bulkAllLabel(len(items), more)}
	var awaiting, undone []string
	for _, it := range items {
		if it.State == models.StateAwaitingApproval {
			awaiting = append(awaiting, it.OperationID)
		}
		if it.Compensates != nil {
			undone = append(undone, *it.Compensates)
		}
	}
	decisions, err := h.Ledger.DecisionEvents(c.Request().Context(), v.Scope, awaiting)
	if err != nil {
		return views.ReviewList{}, err
	}
	undoneKeys, err := h.Ledger.KeysOf(c.Request().Context(), v.Scope, undone)
	if err != nil {
		return views.ReviewList{}, err
	}
	probes := make([]*models.Operation, len(items))
	for i, it := range items {
		probes[i] = &models.Operation{ID: it.OperationID, Tenant: it.Tenant, Tool: it.Tool, Fingerprint: it.Fingerprint, CreatedAt: it.OpCreatedAt}
	}
	alike, err := h.Ledger.HasLookAlikesBy(c.Request().Context(), v.Scope, probes,
		func(tool string) models.LookAlikeRule { return lookAlikeRule(h.Catalog, tool) })
	if err != nil {
		return views.ReviewList{}, err
	}
	rows := make([]queued, 0, len(items))
	for _, it := range items {
		op := views.OperationRow{ID: it.OperationID, Href: OperationHref(it.OperationID), Tenant: it.Tenant,
			Key: it.Key, Tool: it.Tool, State: string(it.State)}
		row := views.ReviewRow{ID: it.ReviewID, Tenant: it.Tenant, Reason: reasonLabel(it.Reason), ReasonShort: reasonShort[it.Reason],
			Opened: views.NewTime(it.OpenedAt, now), OpenedBy: models.ActorName(it.OpenedBy), Operation: op, Age: views.Age(now.Sub(it.OpenedAt)),
			ShowReason: reasonStates[it.Reason] != it.State, Evidence: evidenceLine(it.Evidence), LookAlike: alike[it.OperationID]}
		h.queueFacts(&row, it, decisions[it.OperationID], v, now)
		if it.Compensates != nil {
			row.Label = compensationLabel(undoneKeys[*it.Compensates], row.Summary, row.SummaryIsParams)
		}
		if row.ReasonShort == "" {
			row.ReasonShort = row.Reason
		}
		h.queueClaimAndDeadline(&row, it, v, now)
		at := stakesFor(h.Catalog, it.Tool, it.Params, it.Key, it.Tenant)
		rows = append(rows, queued{row: row, minor: at.Minor, currency: at.Currency})
	}
	if order == sortAmount {
		sortByAmount(rows)
	}
	for _, r := range rows {
		l.Items = append(l.Items, r.row)
	}
	return l, nil
}

// queueFacts fills what a queue row says is at stake: the tool's summary of the params (or the
// params, shortened), and for an operation awaiting approval where the approvals stand, what
// the viewer did, and why a compensation was proposed.
func (h *Console) queueFacts(row *views.ReviewRow, it models.QueueItem, events []models.Event, v *Viewer, now time.Time) {
	if it.Justification != nil {
		row.Justification = shorten(visible(*it.Justification), 200)
	}
	tool, known := h.Catalog.Get(it.Tool)
	if known && it.Params != nil {
		if masked, err := tool.RevealCanonical([]byte(*it.Params)); err == nil { // safe forms for people
			if s, ok := tool.Summary(masked, it.Key, it.Tenant); ok {
				row.Summary = shorten(visible(s), 160)
			} else {
				row.Summary, row.SummaryIsParams = shorten(visible(string(masked)), 160), true
			}
		}
	}
	if it.State != models.StateAwaitingApproval || !known {
		return
	}
	// A policy's hold says why first, in the operator's words (docs/POLICY.md).
	if why := policyWhy(events); why != "" {
		row.Evidence = why
	}
	op := &models.Operation{Fingerprint: it.Fingerprint, Compensates: it.Compensates, Policy: policyOf(events)}
	approvers := models.ApproversOf(op, events, tool.Review.ApprovalTTL, now)
	row.Approvals = fmt.Sprintf("%d of %d", len(approvers), requiredApprovals(op, tool))
	if it.Compensates != nil {
		row.Proposer = models.ProposerOf(events).Name()
		row.ProposerReason = models.ProposalReasonOf(events)
	}
	switch me := v.Person(); {
	case it.Compensates != nil && models.ProposerOf(events).Is(me):
		row.You = "you proposed this"
	case me.Among(approvers):
		row.You = "you approved"
	}
}

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func reviewFilter(c echo.Context) models.ReviewFilter {
	return models.ReviewFilter{
		Tenant: c.QueryParam("tenant"), Tool: c.QueryParam("tool"),
		Reason: oneOf(c.QueryParam("reason"), reviewReasons), Limit: reviewsShown,
		Claims: oneOf(c.QueryParam("claims"), []string{models.ClaimsNone, models.ClaimsMine}),
	}
}

// reviewFields are the queue's filters, by their name in the query (see reviewFilter).
var reviewFields = []string{"tenant", "tool", "reason", "claims", "sort"}

// reviewQuery is q's queue filters alone, without empty values: what a saved view keeps.
func reviewQuery(q url.Values) url.Values { return pick(q, reviewFields) }

func claimOptions(selected string) []views.Option {
	out := options([]string{models.ClaimsNone, models.ClaimsMine}, selected)
	for i := range out {
		out[i].Label = map[string]string{models.ClaimsNone: "Nobody has taken", models.ClaimsMine: "Taken by me"}[out[i].Value]
	}
	return out
}

// queueClaimAndDeadline says who has taken the review and, for an approval, when its window
// closes: soon (within the warning time, when review.expiring goes out) is marked.
func (h *Console) queueClaimAndDeadline(row *views.ReviewRow, it models.QueueItem, v *Viewer, now time.Time) {
	switch holder, held := it.ClaimHolder(now); {
	case !held:
		row.ClaimFree = true
	case holder.Is(v.Person()):
		row.ClaimMine, row.ClaimLeft = true, views.Age(it.ClaimedUntil.Sub(now))
	default:
		row.ClaimBy, row.ClaimLeft = holder.Name(), views.Age(it.ClaimedUntil.Sub(now))
	}
	row.Lapses, row.LapsesSoon = h.approvalLapse(it.State, it.Tool, it.OpCreatedAt, now)
}

// approvalLapse says when an approval of an operation in state, of tool, created then,
// lapses ("lapses in 23 h 56 min"), and whether that is within the warning time; "" for an
// operation not awaiting approval or of a tool no longer in the catalogue.
func (h *Console) approvalLapse(state models.State, toolName string, created, now time.Time) (string, bool) {
	tool, known := h.Catalog.Get(toolName)
	if state != models.StateAwaitingApproval || !known {
		return "", false
	}
	left := models.LapsesAt(created, tool.Review.ApprovalTTL).Sub(now)
	warn := h.ApprovalWarning
	if warn == 0 {
		warn = jobs.DefaultApprovalWarning
	}
	text := "lapses in " + views.Age(left)
	if left <= 0 {
		text = "lapsing now"
	}
	return text, warn > 0 && left <= warn
}

func reasonOptions(selected string) []views.Option {
	out := options(reviewReasons, selected)
	for i := range out {
		out[i].Label = reasonLabel(out[i].Value)
	}
	return out
}

// compensationLabel names a compensation by what it undoes, "Undo support-5514 (close
// T-1003)", rather than by its own key (compensate:op_01…), which says nothing to a person.
func compensationLabel(undoneKey, summary string, summaryIsParams bool) string {
	if undoneKey == "" {
		return ""
	}
	label := "Undo " + undoneKey
	if summary != "" && !summaryIsParams {
		label += " (" + summary + ")"
	}
	return label
}
