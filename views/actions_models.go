package views

// The view models of the operation page's review actions (docs/CONSOLE.md). Handlers decide which
// actions a user may take on an operation in its state; these types only carry the result,
// worded for people.

// ActionPanel is what the operation page shows in its actions slot: where an approval stands,
// and the forms of the actions allowed.
type ActionPanel struct {
	// Heading and Intro say what the person is asked to decide, for the operation's state.
	Heading string
	Intro   string
	// Search, on an UNKNOWN operation a person may decide, is what to search the downstream
	// for: the decision's step 1, its choices step 2 (Choose says what to do with them).
	Search *DownstreamSearch
	Choose string
	// Approvals says where an operation awaiting approval stands; nil otherwise.
	Approvals *ApprovalStatus
	Forms     []ActionForm
	// ReadOnly explains why no forms are shown to a user who may only read (auditors).
	ReadOnly string
	// ExpectedState is the state the page shows, sent back with every form so that an action
	// on an operation that moved meanwhile is refused.
	ExpectedState string
	// ExpectedAttempts is the attempt count the page shows, sent back likewise: an operation
	// retried meanwhile may be in the same state for another reason.
	ExpectedAttempts int
	CSRFToken        string
}

// ApprovalStatus is where an operation awaiting approval stands: Count of Required distinct
// reviewers have approved it, in the order of Approvers.
type ApprovalStatus struct {
	Count     int
	Required  int
	Approvers []string
	// ApproverReasons are the reasons each approver gave, in the order of Approvers ("" when
	// none was kept): what the next approver weighs their own decision against.
	ApproverReasons []string
	// Proposer proposed the compensation this operation is, for ProposerReason; "" for other
	// operations.
	Proposer       string
	ProposerReason string
	// Note tells the signed-in reviewer why they may not approve (again), when they may not.
	Note string
	// Ending is the last four digits of the account or card the operation names, where its
	// record gives them ("3000"); "" otherwise.
	Ending string
}

// Tones of an action: Primary is the expected way forward, Danger ends the operation for good,
// Neutral is everything else (several findings, none preferred).
const (
	TonePrimary = "primary"
	ToneNeutral = "neutral"
	ToneDanger  = "danger"
)

// ActionForm is one review action: a summary line that opens it, what it will do, a required
// reason and, for confirm succeeded, the downstream's reference and result.
type ActionForm struct {
	// Name is the action (confirm_not_executed…), the last segment of its URL.
	Name    string
	URL     string
	Title   string
	Summary string
	// Explain says what will happen; Caution, when set, what to be sure of first.
	Explain string
	Caution string
	Button  string
	Tone    string
	// Risk, when set, is a short word shown beside the title ("Risky"): the action can do
	// harm that cannot be taken back.
	Risk string
	// Reference asks for the downstream reference and an optional result document.
	Reference bool
	// ReasonOptional marks an action that changes nothing by itself (ask the downstream now):
	// its reason may be left out.
	ReasonOptional bool
	// Confirm, when set, is the label of a checkbox the form requires (confirmed=1), such as
	// approving an operation that looks like another: the server refuses it unticked.
	Confirm string
	// Open shows the form unfolded: after a refusal, with what was typed and Error.
	Open  bool
	Input ActionInput
	Error string
}

// ActionInput is what a person typed into an action's form, kept when the action is refused.
type ActionInput struct {
	Reason    string
	Reference string
	Result    string
}

// ButtonClass is the class of a form's submit button: once a form is open its button is the
// way forward, except for an action that ends the operation for good, which stays outlined in
// red so that it never draws the eye first.
func (f ActionForm) ButtonClass() string {
	if f.Tone == ToneDanger {
		return "button button--danger"
	}
	return "button button--primary"
}

// decisionKeys are the keys that open each decision's form on an operation page, as
// console.js reads them (its DECISIONS): shown on the decision so the shortcut is learnt where
// it is used.
var decisionKeys = map[string]string{
	"confirm_succeeded": "s", "confirm_not_executed": "n", "mark_failed": "f", "reconcile_now": "l",
	"approve": "a", "reject": "x", "propose_compensation": "p",
}

// DecisionKey is the key that opens the named decision's form; "" when none does.
func DecisionKey(action string) string { return decisionKeys[action] }
