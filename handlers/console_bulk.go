package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
	"github.com/labstack/echo/v4"
)

// Bulk decisions: one review action with one reason over many operations. The list pages'
// bar posts a selection (ticked rows, or all matching the list's filter, which travels as the
// post's query string) to /bulk/review, which records a snapshot of the operations as they are
// then and shows it for confirmation at /bulk/:id. /bulk/:id/apply decides each operation with
// the same call the operation page's form uses (console_actions.go), against its snapshot:
// one transaction and one audit entry per operation, every rule of the single action applied
// as it is. The loop lives here, not in models, because what it loops over is the console's
// actions (they consult the catalogue for approvals and reconcile); the ledger keeps only the
// run (models/bulk.go).

// bulkMaxAge is how long a confirmation page may be applied: a snapshot older than that is
// too old to decide on, and the reviewer selects again.
const bulkMaxAge = time.Hour

// bulkActions are the actions a bulk decision can take, in the order the bar offers them,
// with their labels, what each does to one operation, and the tone of its button: the one an
// operation page gives it, so that sending again or ending for good never looks like asking.
var bulkActions = []struct{ name, label, explain, tone string }{
	{models.ActionReconcileNow, "Ask the downstream now (reconcile)", "The gateway asks each operation's downstream whether it took effect. Nothing is sent again.", views.TonePrimary},
	{models.ActionConfirmNotExecuted, "Retry (confirm not executed)", "Each operation goes back to PENDING and is sent to its downstream again, at once.", views.ToneNeutral},
	{models.ActionMarkFailed, "Mark failed", "Each operation ends as FAILED_FINAL and is never sent again. This cannot be undone.", views.ToneDanger},
	{models.ActionApprove, "Approve", "Your approval counts once for each operation, for exactly its params; one with all its approvals runs.", views.TonePrimary},
	{models.ActionReject, "Reject", "Each operation ends as FAILED_FINAL and is never sent. This cannot be undone.", views.ToneDanger},
}

// bulkLabel is an action's label, and whether a bulk decision takes it.
func bulkLabel(name string) (label, explain string, ok bool) {
	for _, a := range bulkActions {
		if a.name == name {
			return a.label, a.explain, true
		}
	}
	return "", "", false
}

// bulkTone is the tone of an action's apply button; a retry that may carry some operations
// out twice (risky) is dangerous, as on the operation page.
func bulkTone(name string, risky bool) string {
	if name == models.ActionConfirmNotExecuted && risky {
		return views.ToneDanger
	}
	for _, a := range bulkActions {
		if a.name == name {
			return a.tone
		}
	}
	return views.ToneNeutral
}

// bulkFuncs are the single actions a bulk decision calls, by name.
func (h *Console) bulkFuncs() map[string]actionFunc {
	return map[string]actionFunc{models.ActionReconcileNow: h.reconcileNow, models.ActionConfirmNotExecuted: h.confirmNotExecuted,
		models.ActionMarkFailed: h.markFailed, models.ActionApprove: h.approve, models.ActionReject: h.reject}
}

// bulkBar is the bar of a list page for v, or nil when v may not decide. list is the page
// ("reviews", "operations"), filter its filters alone (searchQuery, reviewQuery: all matching,
// not from this page's cursor on), shown how many rows it shows and more whether others match
// too.
func bulkBar(v *Viewer, list string, filter url.Values, shown int, more bool) *views.BulkBar {
	if !mayAct(v) {
		return nil
	}
	b := &views.BulkBar{Action: "/bulk/review?" + filter.Encode(), List: list, CSRFToken: v.CSRFToken,
		All: bulkAllLabel(shown, more)}
	for _, a := range bulkActions {
		b.Actions = append(b.Actions, views.Option{Value: a.name, Label: a.label})
	}
	return b
}

// bulkAllLabel is the bar's "all matching" choice for a list that shows shown rows, with more
// matching beyond them or not.
func bulkAllLabel(shown int, more bool) string {
	if more {
		return fmt.Sprintf("All matching this filter (more than %d; at most %d at once)", shown, models.BulkLimit)
	}
	return fmt.Sprintf("All %d matching this filter", shown)
}

// BulkReview records the selection posted by a list's bar and shows it for confirmation.
func (h *Console) BulkReview(c echo.Context) error {
	v, err := currentViewer(c)
	if err != nil {
		return err
	}
	if err := c.Request().ParseForm(); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read.")
	}
	form := c.Request().PostForm
	action := form.Get("bulk_action")
	if _, _, ok := bulkLabel(action); !ok {
		return echo.NewHTTPError(http.StatusBadRequest, "Choose an action for the selected operations.")
	}
	ids, capped := form["ids"], false
	if form.Get("all") != "" {
		if ids, capped, err = h.allMatching(c, v, form.Get("list")); err != nil {
			return err
		}
	}
	switch {
	case len(ids) == 0:
		return echo.NewHTTPError(http.StatusBadRequest, "No operation was selected: tick some rows, or “All matching this filter”. Nothing was changed.")
	case len(ids) > models.BulkLimit:
		return echo.NewHTTPError(http.StatusBadRequest, fmt.Sprintf("At most %d operations can be decided at once. Nothing was changed.", models.BulkLimit))
	}
	b, err := h.Ledger.PrepareBulk(c.Request().Context(), v.Scope, models.BulkSelection{By: v.Person(), Action: action, IDs: ids, Capped: capped})
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/bulk/"+url.PathEscape(b.ID))
}

// allMatching lists, in the list's order, the ids of the operations matching the filter in the
// post's query string, within v's scope, at most models.BulkLimit; capped says more matched.
func (h *Console) allMatching(c echo.Context, v *Viewer, list string) (ids []string, capped bool, err error) {
	ctx := c.Request().Context()
	switch list {
	case "reviews":
		f := reviewFilter(c)
		f.Viewer, f.Limit = v.Person(), models.BulkLimit
		items, more, err := h.Ledger.ReviewQueue(ctx, v.Scope, f)
		if err != nil {
			return nil, false, err
		}
		for _, it := range items {
			ids = append(ids, it.OperationID)
		}
		return ids, more, nil
	case "operations":
		s, err := operationSearch(c.QueryParams())
		if err == nil {
			err = h.refuseSensitive(&s) // as the list does: the same operations, or none
		}
		if err != nil {
			return nil, false, echo.NewHTTPError(http.StatusBadRequest, err.Error())
		}
		s.Before, s.Limit = "", 500
		for {
			ops, more, err := h.Ledger.SearchOperations(ctx, v.Scope, s)
			if err != nil {
				return nil, false, err
			}
			for _, op := range ops {
				ids = append(ids, op.ID)
			}
			if len(ids) >= models.BulkLimit {
				return ids[:models.BulkLimit], more || len(ids) > models.BulkLimit, nil
			}
			if !more || len(ops) == 0 {
				return ids, false, nil
			}
			s.Before = ops[len(ops)-1].ID
		}
	}
	return nil, false, echo.NewHTTPError(http.StatusBadRequest, "The form did not say which list it came from.")
}

// viewedBulk is the bulk decision of the path's :id, for its owner or an admin whose tenants
// hold every operation of it; anyone else is told it does not exist. Its operations are those
// within v's scope.
func (h *Console) viewedBulk(c echo.Context) (*Viewer, *models.BulkDecision, error) {
	v, err := currentViewer(c)
	if err != nil {
		return nil, nil, err
	}
	b, err := h.Ledger.BulkDecision(c.Request().Context(), v.Scope, c.Param("id"))
	if err != nil {
		return nil, nil, err
	}
	if !b.Owner().Is(v.Person()) && (v.Role != models.RoleAdmin || b.Hidden > 0) {
		return nil, nil, &models.Error{Code: models.CodeNotFound, Message: "bulk decision not found"}
	}
	return v, b, nil
}

// Bulk shows a bulk decision: the confirmation while it is prepared, the result after.
func (h *Console) Bulk(c echo.Context) error {
	v, b, err := h.viewedBulk(c)
	if err != nil {
		return err
	}
	label, explain, _ := bulkLabel(b.Action)
	p := views.BulkPage{Page: h.page(c, v, "Bulk decision", views.NavReviews), ID: b.ID, Action: label, Explain: explain,
		Prepared: b.Status == models.BulkPrepared, Left: leftOut(b), OneTenant: v.OneTenant()}
	if f, ok := h.takeFlash(c); ok {
		p.Notice, p.Reason = &views.NoticeText{Kind: views.NoticeKind(f.Kind), Message: f.Message}, f.Input.Reason
	}
	for _, it := range b.Items {
		p.Rows = append(p.Rows, views.BulkRow{ID: it.OperationID, Href: OperationHref(it.OperationID), Key: it.Key, Tool: it.Tool,
			Tenant: it.Tenant, State: string(it.ExpectedState), Outcome: it.Outcome, Message: it.Message})
		switch it.Outcome {
		case models.BulkDone:
			p.Done++
		case models.BulkRefused:
			p.Refused++
		default:
			p.Untried++
		}
	}
	if !p.Prepared {
		// The version is read before what the page shows of the operations: a change between the
		// two is shown again at the page's first check, never taken as shown.
		states, version, err := h.Ledger.OperationStates(c.Request().Context(), v.Scope, itemIDs(b))
		if err != nil {
			return err
		}
		p.LiveSrc, p.LiveVersion = "/bulk/"+url.PathEscape(b.ID)+"/version", bulkVersion(b, version)
		for i := range p.Rows {
			p.Rows[i].Now = string(states[p.Rows[i].ID])
		}
	}
	if err := h.bulkStakes(c, v, &p); err != nil {
		return err
	}
	// What was refused (or not tried) is what needs a person next: it comes first.
	slices.SortStableFunc(p.Rows, func(a, b views.BulkRow) int { return outcomeRank(a.Outcome) - outcomeRank(b.Outcome) })
	if p.Prepared && !b.Owner().Is(v.Person()) {
		p.Left = append(p.Left, "Prepared by "+models.ActorName(b.Actor)+", who alone can apply it.")
		return renderPage(c, http.StatusOK, views.Bulk(p))
	}
	if p.Prepared {
		// What changed since the selection will be refused, each by its own check: the risk
		// and the count are those of the operations still as they were selected.
		states, _, err := h.Ledger.OperationStates(c.Request().Context(), v.Scope, itemIDs(b))
		if err != nil {
			return err
		}
		var still []models.BulkItem
		for _, it := range b.Items {
			if states[it.OperationID] == it.ExpectedState {
				still = append(still, it)
			}
		}
		if len(still) == 0 {
			p.Left = append(p.Left, "Every operation selected has changed since: there is nothing left to decide here.")
			return renderPage(c, http.StatusOK, views.Bulk(p))
		}
		p.Unchanged = len(still)
		p.ApplyURL, p.CSRFToken = "/bulk/"+url.PathEscape(b.ID)+"/apply", v.CSRFToken
		if b.Action == models.ActionConfirmNotExecuted {
			p.Risk = h.riskWords(still)
			risky := 0
			for _, n := range h.riskyTools(still) {
				risky += n
			}
			p.Others = len(still) - risky
		}
		if b.Action == models.ActionApprove {
			if p.LookAlikes, err = h.bulkLookAlikes(c, v, b); err != nil {
				return err
			}
		}
		p.Tone = bulkTone(b.Action, len(p.Risk) > 0)
		return renderPage(c, http.StatusOK, views.Bulk(p))
	}
	p.By, p.Stopped = models.ActorName(b.Actor), b.Status == models.BulkApplying
	if b.AppliedAt != nil {
		p.When = views.NewTime(*b.AppliedAt, time.Time{})
	}
	if b.Reason != nil {
		p.AppliedReason = *b.Reason
	}
	return renderPage(c, http.StatusOK, views.Bulk(p))
}

// BulkVersion answers the result page's question "has it changed?": a version of the
// decision's outcomes and of its operations' rows, as plain text.
func (h *Console) BulkVersion(c echo.Context) error {
	v, b, err := h.viewedBulk(c)
	if err != nil {
		return err
	}
	_, version, err := h.Ledger.OperationStates(c.Request().Context(), v.Scope, itemIDs(b))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.String(http.StatusOK, bulkVersion(b, version))
}

// bulkVersion is the version of b's result page, whose operations' rows have the version ops:
// it changes when they do, and when the run records an outcome or ends (another tab applying).
func bulkVersion(b *models.BulkDecision, ops string) string {
	sum := sha256.New()
	fmt.Fprintf(sum, "%s|%s|", b.Status, ops)
	for _, it := range b.Items {
		fmt.Fprintf(sum, "%d:%s,", it.Seq, it.Outcome)
	}
	return hex.EncodeToString(sum.Sum(nil)[:8])
}

// itemIDs are the ids of b's operations, in its order.
func itemIDs(b *models.BulkDecision) []string {
	ids := make([]string, len(b.Items))
	for i, it := range b.Items {
		ids[i] = it.OperationID
	}
	return ids
}

// outcomeRank orders a result's rows: refused, not tried, done.
func outcomeRank(outcome string) int {
	switch outcome {
	case models.BulkRefused:
		return 0
	case models.BulkDone:
		return 2
	}
	return 1
}

// leftOut says what was selected but is not part of b.
func leftOut(b *models.BulkDecision) []string {
	var out []string
	if b.Capped {
		out = append(out, fmt.Sprintf("More than %d operations matched; only the first %d are included.", models.BulkLimit, models.BulkLimit))
	}
	if b.LeftOut > 0 {
		st, _ := models.ActionAppliesTo(b.Action)
		out = append(out, fmt.Sprintf("%s left out: not %s when selected, so this action does not apply.", countOps(b.LeftOut), st))
	}
	if b.Unseen > 0 {
		out = append(out, fmt.Sprintf("%s left out: not found among your tenants' operations.", countOps(b.Unseen)))
	}
	if len(b.Items) == 0 && b.Status == models.BulkPrepared {
		out = append(out, "Nothing is left to decide. Go back to the list and select again.")
	}
	return out
}

func countOps(n int) string {
	if n == 1 {
		return "1 operation"
	}
	return strconv.Itoa(n) + " operations"
}

// riskyTools counts, by tool, the items whose tool cannot recognise a repeat (the operation
// page marks their retry "Risky"): a tool without key support, or no longer in the catalogue.
func (h *Console) riskyTools(items []models.BulkItem) map[string]int {
	out := map[string]int{}
	for _, it := range items {
		if tool, known := h.Catalog.Get(it.Tool); !known || !tool.RetrySafe() {
			out[it.Tool]++
		}
	}
	return out
}

// riskWords names the risk of a bulk retry, a sentence per tool that cannot recognise a repeat.
func (h *Console) riskWords(items []models.BulkItem) []string {
	risky := h.riskyTools(items)
	tools := make([]string, 0, len(risky))
	for t := range risky {
		tools = append(tools, t)
	}
	slices.Sort(tools)
	out := make([]string, 0, len(tools))
	for _, t := range tools {
		out = append(out, fmt.Sprintf("%d of these go to %s, which cannot recognise a repeat; if the first attempt did reach it, "+
			"this sends a second %s request.", risky[t], t, t))
	}
	return out
}

// riskChoice reads the second confirmation of a bulk retry (the form's risk: accept or skip):
// the tools to leave out, and whether the choice was made where one is needed, that is when
// the retry includes tools that cannot recognise a repeat.
func (h *Console) riskChoice(b *models.BulkDecision, choice string) (skip map[string]bool, chosen bool) {
	if b.Action != models.ActionConfirmNotExecuted {
		return nil, true
	}
	risky := h.riskyTools(b.Items)
	switch {
	case len(risky) == 0 || choice == "accept":
		return nil, true
	case choice == "skip":
		skip = make(map[string]bool, len(risky))
		for t := range risky {
			skip[t] = true
		}
		return skip, true
	}
	return nil, false
}

// BulkApply applies a prepared bulk decision, once, and shows its result.
func (h *Console) BulkApply(c echo.Context) error {
	v, b, err := h.viewedBulk(c)
	if err != nil {
		return err
	}
	page := "/bulk/" + url.PathEscape(b.ID)
	reason := strings.TrimSpace(c.FormValue("reason"))
	again := func(kind views.NoticeKind, msg string) error {
		h.Sessions.SetFlash(c, Flash{Kind: string(kind), Message: msg, Input: views.ActionInput{Reason: reason}})
		return c.Redirect(http.StatusSeeOther, page)
	}
	switch {
	case !b.Owner().Is(v.Person()):
		return again(views.NoticeError, "Only "+models.ActorName(b.Actor)+", who prepared this bulk decision, can apply it. Nothing was changed.")
	case b.Status != models.BulkPrepared:
		return again(views.NoticeInfo, "This bulk decision has already been applied; nothing was done again.")
	case reason == "":
		return again(views.NoticeError, "Nothing was changed. A reason is required.")
	}
	skip, chosen := h.riskChoice(b, c.FormValue("risk"))
	if !chosen {
		RecordRefusal(c, h.Ledger, h.Log, models.AuditInput{Actor: v.Actor(), Action: "review.bulk",
			Detail: map[string]any{"bulk": b.ID, "action": b.Action, "refusal": "retry of tools without key support not confirmed"}})
		return again(views.NoticeError, "Nothing was changed. Some of these cannot recognise a repeat: choose whether to retry them too or leave them out.")
	}
	// Once started, the run goes on if the browser goes away: half a run is harder to read.
	ctx := context.WithoutCancel(c.Request().Context())
	b, err = h.Ledger.StartBulk(ctx, v.Scope, v.Person(), b.ID, reason, bulkMaxAge)
	if models.ErrorCode(err) == models.CodeStale {
		return again(views.NoticeInfo, sentence(errDetail(err)))
	}
	if err != nil {
		return err
	}
	done, refused, err := h.applyBulk(ctx, c, v, b, reason, skip)
	if err != nil {
		return err
	}
	if err := h.Ledger.FinishBulk(ctx, b.ID); err != nil {
		return err
	}
	if _, err := h.Ledger.Audit(ctx, models.AuditInput{Actor: v.Actor(), Action: "review.bulk", Outcome: "ok", RequestID: RequestID(c),
		Detail: map[string]any{"bulk": b.ID, "action": b.Action, "reason": reason, "done": done, "refused": refused}}); err != nil {
		return err
	}
	kind := views.NoticeSuccess
	if refused > 0 {
		kind = views.NoticeWarning
	}
	h.Sessions.SetFlash(c, Flash{Kind: string(kind), Message: fmt.Sprintf("%d done, %d refused. Each refusal says why below.", done, refused)})
	return c.Redirect(http.StatusSeeOther, page)
}

// applyBulk decides each operation of b in turn and records its outcome. An error that is not
// a refusal (the ledger unreachable) stops the run: the rest stay untried, and say so.
func (h *Console) applyBulk(ctx context.Context, c echo.Context, v *Viewer, b *models.BulkDecision, reason string, skip map[string]bool) (done, refused int, err error) {
	do := h.bulkFuncs()[b.Action]
	for _, it := range b.Items {
		outcome, msg := models.BulkRefused, ""
		if skip[it.Tool] {
			msg = it.Tool + " cannot recognise a repeat, and you chose to leave these out. Nothing was sent."
		} else if outcome, msg, err = h.applyOne(ctx, c, v, b, it, reason, do); err != nil {
			return done, refused, err
		}
		if err := h.Ledger.RecordBulkOutcome(ctx, b.ID, it.Seq, outcome, msg); err != nil {
			return done, refused, err
		}
		if outcome == models.BulkDone {
			done++
		} else {
			refused++
		}
	}
	return done, refused, nil
}

// applyOne decides one operation through the single action's call, against the state and
// attempt count the reviewer confirmed, and says what became of it.
func (h *Console) applyOne(ctx context.Context, c echo.Context, v *Viewer, b *models.BulkDecision, it models.BulkItem, reason string, do actionFunc) (outcome, msg string, err error) {
	// The operation alone: the actions read nothing else of its record, and a thousand full
	// records (events, attempts, audit) would cost a thousand times what the decision does.
	// The scope is the viewer's now, which may be narrower than when they selected.
	if !v.Scope.Allows(it.Tenant) {
		return models.BulkRefused, "It is not among your tenants' operations.", nil
	}
	op, err := h.Ledger.Get(ctx, it.Tenant, it.OperationID)
	if models.ErrorCode(err) == models.CodeNotFound {
		return models.BulkRefused, "It is not among your tenants' operations.", nil
	}
	if err != nil {
		return "", "", err
	}
	rec := &models.OperationRecord{Op: op}
	r := actionRequest{Rec: rec, Input: views.ActionInput{Reason: reason}, Action: models.Action{Scope: v.Scope, Tenant: rec.Op.Tenant,
		OperationID: rec.Op.ID, Actor: v.Actor(), UserID: v.ID, Reason: reason, ExpectedState: it.ExpectedState,
		ExpectedAttempts: it.ExpectedAttempts, RequestID: RequestID(c)}}
	res, err := do(ctx, r)
	if err == nil {
		return models.BulkDone, res.Message, nil
	}
	if !AnswerFor(err).Refusal {
		return "", "", err
	}
	msg = bulkRefusal(err, it, rec.Op)
	RecordRefusal(c, h.Ledger, h.Log, models.AuditInput{Actor: v.Actor(), Action: "review." + b.Action, Tenant: rec.Op.Tenant,
		OperationID: rec.Op.ID, Detail: map[string]any{"refusal": msg, "reason": reason, "bulk": b.ID,
			"expected_state": string(it.ExpectedState), "state": string(rec.Op.State)}})
	return models.BulkRefused, msg, nil
}

// bulkRefusal says in a sentence why the ledger refused one operation of a bulk decision.
func bulkRefusal(err error, it models.BulkItem, read *models.Operation) string {
	if models.ErrorCode(err) != models.CodeStale {
		return sentence(errDetail(err))
	}
	now := read
	if op := models.ErrorOperation(err); op != nil {
		now = op
	}
	switch {
	case now.State != it.ExpectedState:
		return fmt.Sprintf("Changed meanwhile: it is %s now, not %s as when you confirmed. Nothing was changed; open it to decide again.",
			now.State, it.ExpectedState)
	case now.Attempts != it.ExpectedAttempts:
		return fmt.Sprintf("Changed meanwhile: it has had %d attempts now, not %d as when you confirmed. Nothing was changed; open it to decide again.",
			now.Attempts, it.ExpectedAttempts)
	}
	return sentence(errDetail(err))
}

// bulkStakes fills in what each operation of p does (its tool's summary, from the masked
// params), what its attempts and look-ups saw, and the total amount at stake, per currency,
// so that a reviewer approving "all matching" payouts sees the sums they approve, and one
// retrying many sees which of them got an answer.
func (h *Console) bulkStakes(c echo.Context, v *Viewer, p *views.BulkPage) error {
	ids := make([]string, len(p.Rows))
	for i, r := range p.Rows {
		ids[i] = r.ID
	}
	stored, err := h.Ledger.StoredParams(c.Request().Context(), v.Scope, ids)
	if err != nil {
		return err
	}
	evidence, err := h.Ledger.Evidence(c.Request().Context(), v.Scope, ids)
	if err != nil {
		return err
	}
	dks, err := h.Ledger.DownstreamKeysOf(c.Request().Context(), v.Scope, ids)
	if err != nil {
		return err
	}
	for i := range p.Rows {
		p.Rows[i].Evidence = evidenceParts(evidence[p.Rows[i].ID])
	}
	totals := map[string]*big.Int{}
	for i := range p.Rows {
		r := &p.Rows[i]
		params, ok := stored[r.ID]
		if !ok {
			continue
		}
		st := stakesFor(h.Catalog, r.Tool, &params, r.Key, r.Tenant)
		r.Summary = shorten(st.Summary, 160)
		if tool, known := h.Catalog.Get(r.Tool); known && tool.HasReferenceURL() {
			var masked map[string]any
			if m, err := tool.MaskCanonical([]byte(params)); err == nil {
				_ = json.Unmarshal(m, &masked)
			}
			r.LookupURL = tool.ReferenceURL(catalog.TemplateData{OperationID: r.ID, DownstreamKey: dks[r.ID], Key: r.Key,
				Tenant: r.Tenant, Params: masked})
		}
		if st.Minor != nil {
			if totals[st.Currency] == nil {
				totals[st.Currency] = new(big.Int)
			}
			totals[st.Currency].Add(totals[st.Currency], st.Minor)
			p.Priced++
		}
	}
	currencies := slices.Sorted(maps.Keys(totals))
	parts := make([]string, len(currencies))
	for i, cur := range currencies {
		parts[i] = catalog.Money(totals[cur].String(), cur)
	}
	p.AtStake = strings.Join(parts, " + ")
	return nil
}

// bulkLookAlikes says which operations of an approval share a tool and params under different
// keys: approving them all at once may do one thing twice, which a person must see first.
func (h *Console) bulkLookAlikes(c echo.Context, v *Viewer, b *models.BulkDecision) ([]string, error) {
	groups, err := h.Ledger.LookAlikeGroups(c.Request().Context(), v.Scope, itemIDs(b))
	if err != nil {
		return nil, err
	}
	keyOf := map[string]string{}
	for _, it := range b.Items {
		keyOf[it.OperationID] = it.Key
	}
	var out []string
	for _, g := range groups {
		keys := make([]string, len(g))
		for i, id := range g {
			keys[i] = keyOf[id]
		}
		out = append(out, fmt.Sprintf("%s: the same tool and params under %d keys. Approving all of them may do the same thing %d times; approve only those that are meant.",
			strings.Join(keys, ", "), len(g), len(g)))
	}
	return out, nil
}
