package handlers

import (
	"fmt"
	"time"

	"github.com/idemgate/idemgate/handlers/opview"
	"github.com/idemgate/idemgate/jobs"
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/views"
)

// The operation page's review actions: which a user may take on an operation in its state,
// and how each is explained. The ledger enforces every rule again when the form comes back;
// this only decides what to offer.

// ActionProposeCompensation names the console's action that proposes a compensation; the others
// are the ledger's (models.Action…).
const ActionProposeCompensation = "propose_compensation"

// refusedAction is an action the ledger just refused: its form opens again with what was typed
// and why.
type refusedAction struct {
	Name    string
	Input   views.ActionInput
	Message string
}

// mayAct reports whether v's role may take review actions: reviewers and admins may, auditors
// only read.
func mayAct(v *Viewer) bool { return v.Role == models.RoleReviewer || v.Role == models.RoleAdmin }

// requiredApprovals is how many distinct reviewers must approve op: the tool's review.approvals,
// or the count of the policy rule that held it (its `approvals`, when the ledger attached the
// decision), and at least one for a compensation whatever its tool says.
func requiredApprovals(op *models.Operation, tool *catalog.Tool) int {
	n := tool.Review.Approvals
	if op.Policy != nil && op.Policy.Decision == models.PolicyRequireApproval && op.Policy.Approvals > 0 {
		n = op.Policy.Approvals
	}
	if op.Compensates != nil {
		n = max(n, 1)
	}
	return n
}

// actionPanel builds the actions slot of the operation page for v. search is what to search
// the downstream for (the situation's): on an UNKNOWN operation v may decide, it is the
// decision's step 1, and its choices step 2.
func (h *Console) actionPanel(v *Viewer, rec *models.OperationRecord, now time.Time, refused *refusedAction, search *views.DownstreamSearch) views.ActionPanel {
	op := rec.Op
	p := views.ActionPanel{ExpectedState: string(op.State), ExpectedAttempts: op.Attempts, CSRFToken: v.CSRFToken}
	tool, known := h.Catalog.Get(op.Tool)
	switch op.State {
	case models.StateUnknown:
		p.Heading = "Decide what happened"
		// With what to search for as its step 1, the intro is one line on a phone: the
		// situation below says why the gateway did not settle it alone.
		p.Intro = "Nobody knows whether it took effect."
		p.Forms = unknownForms(op, tool, known, stakesOf(h.Catalog, op))
		if search != nil {
			p.Search, p.Choose = search, "Record what you found:"
		} else {
			p.Intro = "Nobody knows whether this call took effect, and the gateway does not guess. " +
				"Look for it in the downstream system, then record what you found."
		}
	case models.StateAwaitingApproval:
		p.Heading = "Approve or reject"
		p.Forms = h.approvalForms(v, rec, tool, known, now, &p)
	case models.StateSucceeded:
		if by, err := jobs.Compensable(h.Catalog, op); err == nil && op.CompensatedBy == nil && h.Executor != nil {
			p.Heading = "Undo this operation"
			p.Forms = []views.ActionForm{proposeForm(op, by.Name)}
		}
	}
	if len(p.Forms) > 0 && !mayAct(v) {
		p.Forms, p.Search = nil, nil
		p.ReadOnly = "Your role (" + string(v.Role) + ") can read this operation but not act on it."
	}
	for i := range p.Forms {
		p.Forms[i].URL = OperationHref(op.ID) + "/actions/" + p.Forms[i].Name
		if refused != nil && p.Forms[i].Name == refused.Name {
			p.Forms[i].Open, p.Forms[i].Input, p.Forms[i].Error = true, refused.Input, refused.Message
		}
	}
	return p
}

// unknownForms are the choices on an UNKNOWN operation, safest first and the irreversible one
// last. Asking the downstream is offered only for a tool that can be asked (reconcile); a retry
// of a tool whose downstream does not deduplicate is marked as the risk it is.
func unknownForms(op *models.Operation, tool *catalog.Tool, known bool, st stakes) []views.ActionForm {
	var forms []views.ActionForm
	if known && tool.Reconcile != nil {
		forms = append(forms, views.ActionForm{Name: models.ActionReconcileNow, Title: "Not sure yet — ask the downstream now",
			Summary: "Run a look-up at once instead of waiting for the next one.",
			Explain: "The gateway asks the downstream whether this operation took effect and settles it if the answer is clear. " +
				"Nothing is sent again. The look-up's outcome appears on the timeline.",
			Button: "Ask now", Tone: views.ToneNeutral, ReasonOptional: true})
	}
	forms = append(forms, views.ActionForm{Name: models.ActionConfirmSucceeded, Title: "It took effect — confirm succeeded",
		Summary: "You found it in the downstream system.",
		Explain: "The operation becomes SUCCEEDED with the reference you give, and the agent is told it succeeded. " +
			"Nothing is sent again.",
		Button: "Confirm succeeded", Tone: views.ToneNeutral, Reference: true})
	retry := views.ActionForm{Name: models.ActionConfirmNotExecuted, Title: "It did not take effect — retry it",
		Summary: "You confirmed in the downstream system that it is not there.",
		Explain: fmt.Sprintf("The operation goes back to PENDING and %s is sent to the downstream again, at once.", op.Tool),
		Caution: "Only do this if you have confirmed in the downstream system that the first request was not carried out.",
		Button:  st.buttonFor("Confirm not executed and retry"), Tone: views.ToneNeutral}
	switch {
	case !known || !tool.RetrySafe():
		retry.Tone, retry.Risk = views.ToneDanger, "Risky"
		retry.Summary = "Sends it again. If the first one did take effect, it happens twice."
		twice := "the same call, twice"
		if st.Summary != "" {
			twice = st.Summary + ", twice"
		}
		retry.Caution = fmt.Sprintf("%s does not honour idempotency keys: if the first request was carried out, this retry "+
			"carries it out a second time (%s). Only do this once you have searched the downstream "+
			"for it and found nothing.", op.Tool, twice)
		if !known {
			retry.Caution = op.Tool + " is no longer in the catalogue, so nothing says a repeat is harmless. " +
				"Only do this once you have searched the downstream for it and found nothing."
		}
		retry.Button = st.buttonFor("Retry") + ": it is not there"
	default:
		retry.Caution = "The downstream deduplicates on the key the gateway sends, so a repeat of a request that did take effect " +
			"changes nothing. Still, confirm first: the timeline keeps what you record."
	}
	forms = append(forms, retry, views.ActionForm{Name: models.ActionMarkFailed, Title: "Give up — mark failed",
		Summary: "End it without sending it again. This cannot be undone.",
		Explain: "The operation ends as FAILED_FINAL and is never sent again; the agent is told it failed.",
		Caution: "This cannot be undone. If the call did take effect, confirm succeeded instead.",
		Button:  "Mark failed", Tone: views.ToneDanger})
	return forms
}

// approvalForms are the choices on an operation awaiting approval, and fill p's intro and
// approval status. A reviewer who may not approve (again) sees why instead of the form.
func (h *Console) approvalForms(v *Viewer, rec *models.OperationRecord, tool *catalog.Tool, known bool, now time.Time, p *views.ActionPanel) []views.ActionForm {
	op := rec.Op
	reject := views.ActionForm{Name: models.ActionReject, Title: "Reject",
		Summary: "It must not run. This cannot be undone.",
		Explain: "The operation ends as FAILED_FINAL and is never sent; the agent is told a reviewer rejected it.",
		Caution: "This cannot be undone.",
		Button:  "Reject", Tone: views.ToneDanger}
	if !known {
		p.Intro = "The tool " + op.Tool + " is no longer in the catalogue, so how many approvals it needs is unknown: it can only be rejected."
		return []views.ActionForm{reject}
	}
	required := requiredApprovals(op, tool)
	approvers := models.ApproversOf(op, rec.Events, tool.Review.ApprovalTTL, now)
	view := opview.Render(h.Catalog, op) // masked params, the recorded result: no digit of a secret
	st := &views.ApprovalStatus{Required: required, Count: len(approvers), Ending: endingOf(view.Params, view.Result)}
	for _, a := range approvers {
		st.Approvers = append(st.Approvers, a.Name())
		st.ApproverReasons = append(st.ApproverReasons, approvalReason(rec.Events, a, op.Fingerprint))
	}
	p.Approvals = st
	var proposer models.Person
	p.Intro = fmt.Sprintf("%s is sent only once %s approved it. Check the params below, then decide.", op.Tool, reviewersHave(required))
	if op.Compensates != nil {
		proposer = models.ProposerOf(rec.Events)
		st.Proposer = proposer.Name()
		st.ProposerReason = models.ProposalReasonOf(rec.Events)
		p.Intro = fmt.Sprintf("This operation undoes another one (see Linked operations). It runs only once %s approved it, "+
			"and the reviewer who proposed it cannot be one of them.", reviewersHave(required))
	}
	switch {
	case op.Compensates != nil && proposer.Is(v.Person()):
		st.Note = "You proposed this compensation, so another reviewer must approve it."
	case v.Person().Among(approvers):
		st.Note = fmt.Sprintf("You have approved it. It still needs %s, from another reviewer.", moreApprovals(required-st.Count))
	default:
		approve := views.ActionForm{Name: models.ActionApprove, Title: "Approve",
			Summary: fmt.Sprintf("Your approval would be %d of %d.", st.Count+1, required),
			Explain: fmt.Sprintf("Your approval counts once, for exactly these params. It will still need %s from other reviewers; then %s is sent.",
				moreApprovals(required-st.Count-1), op.Tool),
			Button: stakesOf(h.Catalog, op).buttonFor("Approve"), Tone: views.TonePrimary}
		if st.Count+1 >= required {
			approve.Explain = fmt.Sprintf("Yours is the last approval needed: %s is sent to the downstream at once, with exactly these params.", op.Tool)
		}
		return []views.ActionForm{approve, reject}
	}
	return []views.ActionForm{reject}
}

// proposeForm offers the compensation of a SUCCEEDED operation.
func proposeForm(op *models.Operation, compensation string) views.ActionForm {
	return views.ActionForm{Name: ActionProposeCompensation, Title: "Propose compensation",
		Summary: "Create the operation that undoes this one; another reviewer must approve it.",
		Explain: fmt.Sprintf("Creates %s with key compensate:%s, which undoes this operation. It does not run yet: "+
			"it waits for approval by a reviewer other than you (four eyes), then runs once.", compensation, op.ID),
		Button: "Propose compensation", Tone: views.ToneNeutral}
}

// reviewersHave spells how many reviewers must have approved: "1 reviewer has", "2 different
// reviewers have".
func reviewersHave(n int) string {
	if n == 1 {
		return "1 reviewer has"
	}
	return fmt.Sprintf("%d different reviewers have", n)
}

// moreApprovals spells approvals still missing: "1 more approval", "2 more approvals".
func moreApprovals(n int) string {
	if n == 1 {
		return "1 more approval"
	}
	return fmt.Sprintf("%d more approvals", n)
}

// approvalReason is the reason who gave with their latest approval of this fingerprint.
func approvalReason(events []models.Event, who models.Person, fingerprint string) string {
	reason := ""
	for _, e := range events {
		if e.Type != models.EventReviewAction || !e.Person().Is(who) {
			continue
		}
		d := detailMap(e.Detail)
		if str(d["action"]) == models.ActionApprove && str(d["fingerprint"]) == fingerprint {
			reason = str(d["reason"])
		}
	}
	return reason
}
