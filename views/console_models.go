package views

import "github.com/a-h/templ"

// The console pages' view models. Handlers fill them from ledger records; every value is
// already formatted for reading, and sensitive params are already masked.

// Option is one choice of a select.
type Option struct {
	Value    string
	Label    string
	Selected bool
}

// Time is a moment as pages show it: Text for people (UTC), ISO for the datetime attribute,
// Age as "4 min ago" where useful.
type Time struct {
	Text string
	ISO  string
	Age  string
}

// InvitePage is where an invited person chooses their password: Email is who they are, Action
// where the form posts; Broken says why a link does not work (and no form is shown), Error why
// the password was refused.
type InvitePage struct {
	Page   Page
	Email  string
	Action string
	Broken string
	Error  string
}

// LoginPage is the sign-in form.
type LoginPage struct {
	Page  Page
	Email string
	Next  string
	// Error says why the last attempt failed; Notice reports something calmer, such as a
	// sign-out.
	Error  string
	Notice string
	// SSOName and SSOStart offer single sign-on ("Sign in with SSOName" linking to SSOStart)
	// when it is configured.
	SSOName  string
	SSOStart string
}

// StateCount is one state's tile on the dashboard.
type StateCount struct {
	State string
	Count int64
	Href  string
}

// OperationRow is an operation as lists show it.
type OperationRow struct {
	ID            string
	Href          string
	Tenant        string
	Key           string
	Tool          string
	State         string
	StepID        string
	WorkflowRunID string
	WorkflowHref  string
	Created       Time
	Updated       Time
	// Why says, in the dashboard's overdue list, which window the operation has passed.
	Why string
	// Attempts and ErrorClass ("" when none) are shown by the search's results.
	Attempts   int
	ErrorClass string
	// Amount is what the operation moves, from its tool's summary ("42.00 EUR"), "" when
	// the tool names none.
	Amount string
	// Pick shows the row's checkbox for the bulk bar.
	Pick bool
}

// DashboardPage is the overview.
type DashboardPage struct {
	Page         Page
	States       []StateCount
	Total        int64
	OpenReviews  int64
	Oldest       *OperationRow
	OldestAge    string
	Overdue      []OperationRow
	OverdueCount int64
	// Approvals are the operations awaiting approval; ApprovalsSum what they put at stake, per
	// currency ("4,649.00 EUR"), "" when none has an amount; ApprovalsPartial says the sum is of
	// the newest only.
	Approvals        int64
	ApprovalsSum     string
	ApprovalsPartial bool
	Attempts         Chart
	Probes           Chart
}

// ReviewsPage is the review queue with its filters.
type ReviewsPage struct {
	Page    Page
	Tenants []Option
	Tools   []Option
	Reasons []Option
	Claims  []Option
	Sorts   []Option // the queue's orders (sort=)
	List    ReviewList
	Views   SavedViews
	Bulk    *BulkBar // nil for those who may not decide
	// Email, when reviewers are emailed, says whether this person is; nil when nobody is.
	Email *EmailChoice
}

// EmailChoice is how a person gets email about reviews (each, an hourly digest, none), and the
// form that changes it.
type EmailChoice struct {
	Options   []Option
	CSRFToken string
}

// ReviewList is the part of the review queue that refreshes itself.
type ReviewList struct {
	Items []ReviewRow
	More  bool
	// Src is the URL the list reloads from (the fragment with the same filters).
	Src string
	// RefreshMS is how often it reloads, in milliseconds.
	RefreshMS string
	Updated   Time
	// CSRFToken goes with each row's take and give-back forms; CanClaim is false for
	// auditors, who read only.
	CSRFToken string
	CanClaim  bool
	Pick      bool // rows have the bulk bar's checkbox
	// OneTenant hides the tenant column: a viewer of one tenant learns nothing from it.
	OneTenant bool
	// BulkAll is the bulk bar's "all matching" label for this list, which console.js copies
	// into the bar when it swaps the list in, so the count follows the queue.
	BulkAll string
}

// ReviewRow is one open review: how long it has waited (Age), what is at stake (Summary, or
// the params shortened), where an approval stands ("1 of 2"), what the signed-in reviewer
// already did (You), and for a compensation why it was proposed.
type ReviewRow struct {
	ID     string
	Tenant string
	// Reason is why the review is open, in full ("Compensation needs approval"); ReasonShort
	// says it in a queue row's few words ("Undo approval").
	Reason      string
	ReasonShort string
	Opened      Time
	OpenedBy    string
	Operation   OperationRow
	Age         string
	Summary     string
	// SummaryIsParams is set when Summary is the params themselves (the tool has no summary).
	SummaryIsParams bool
	// Label names the operation for people where its key does not ("Undo support-5514"); ""
	// shows the key.
	Label string
	// Justification is the agent's reason, shortened; "" when none was given.
	Justification  string
	Approvals      string
	You            string
	ProposerReason string
	Proposer       string
	// ClaimBy names who has taken the review ("" when nobody has; the viewer's own claim is
	// ClaimMine) and ClaimLeft for how long ("27 min"); ClaimMine and ClaimFree say which
	// button the row offers: give back, or take.
	ClaimBy   string
	ClaimLeft string
	ClaimMine bool
	ClaimFree bool
	// Lapses counts down an approval's window ("lapses in 40 min"); LapsesSoon marks it
	// within the warning time, when review.expiring has gone out.
	Lapses     string
	LapsesSoon bool
	// ShowReason is set when the operation's state does not already say why it waits (an
	// UNKNOWN outcome, an approval): a row says it once, by its state badge, and names the
	// reason beside it only when it adds something (a person handed it over).
	ShowReason bool
	// Evidence says what its attempts and look-ups saw ("14 look-ups told nothing either way
	// (HTTP 500) · 1 attempt · timeout"); "" when nothing was tried.
	Evidence string
	// LookAlike marks an operation with look-alikes (models.LookAlikes).
	LookAlike bool
}

// SearchPage is the operation search.
type SearchPage struct {
	Page         Page
	Key          string
	Reference    string
	Param        string
	Workflow     string
	ErrorClasses []Option
	From         string
	To           string
	States       []Option
	Tools        []Option
	Tenants      []Option
	Rows         []OperationRow
	Searched     bool
	// MoreOpen unfolds the filters beyond key and param: one of them is set.
	MoreOpen bool
	NextHref string
	Error    string
	Views    SavedViews
	Bulk     *BulkBar // nil for those who may not decide
}

// SavedViews is a page's panel of saved views: the viewer's own, as links, and the form that
// saves the filter shown.
type SavedViews struct {
	Page      string // "operations" or "reviews"
	Query     string // the filter shown, as a view would keep it
	CanSave   bool   // there is a filter to save
	CSRFToken string
	Views     []SavedViewLink
	// Notice is the outcome of the last save or delete.
	Notice *NoticeText
}

// SavedViewLink is one saved view; Current marks the one whose filter is shown.
type SavedViewLink struct {
	ID      string
	Name    string
	Href    string
	Current bool
}

// OperationPage is one operation in full.
type OperationPage struct {
	Page Page
	// LiveVersion is the operation's version as rendered, and LiveSrc where console.js asks for
	// the current one: when they differ, the page shows itself again (or says so, if a form
	// holds typed text).
	LiveVersion string
	LiveSrc     string
	// Headline says what is at stake, above everything else: the tool's summary ("4,800.00
	// EUR for order 7702"), or "" (the key heads the page). Amount is the amount alone,
	// Downstream the system the tool reaches, Justification the agent's reason.
	Headline      string
	Amount        string
	Downstream    string
	Justification string
	// Claim is who has taken the open review and when an approval lapses; nil without an open
	// review.
	Claim         *ClaimBox
	Op            OperationRow
	Fingerprint   string
	DownstreamKey string // the key sent downstream (docs/STATES.md)
	Attempts      int
	NextAttemptAt *Time
	Completed     *Time
	DownstreamRef string
	// Notice is the outcome of the action just taken, shown before anything else.
	Notice *NoticeText
	// Situation says, at the top, why a person is needed and what is safe. DecisionFirst puts
	// the decision above it, while a person must decide.
	Situation     Situation
	DecisionFirst bool
	// LookAlikes are the tenant's other operations of the same tool and params made within a
	// day of this one; nil when there are none.
	LookAlikes *LookAlikes
	// Params and Result are pretty-printed JSON with sensitive params masked; a note says why
	// one is not shown.
	Params        string
	ParamsNote    string
	Result        string
	ResultNote    string
	Timeline      Timeline
	Reviews       []ReviewInfo
	Audit         []AuditRow
	Compensates   *OperationRow
	CompensatedBy *OperationRow
	// Actions are the review actions allowed on this operation for this user; nil shows none.
	Actions templ.Component
}

// LookAlikes warns of operations that look like this one: the same tool and params under
// another key, which an agent that minted a new key for one intent would leave. Urgent is set
// while a person decides this one (an approval, an UNKNOWN): they are the last defence.
type LookAlikes struct {
	Urgent bool
	Rows   []LookAlikeRow
	More   bool
	// Equal says which params are equal ("card_number, amount_cents and currency", or "every
	// param"), Window within what time ("a day"), and First which operation came first.
	Equal  string
	Window string
	First  string
}

// LookAlikeRow is one look-alike: a link to it, its key and state, when it was made, and who
// approved it ("" for nobody).
type LookAlikeRow struct {
	Href       string
	Key        string
	State      string
	Created    Time
	ApprovedBy string
}

// Situation is the top of an operation page, in plain words: what happened (Outcome), why the
// gateway did not settle it alone (Why), where reconciliation stands (Reconcile), the error as
// recorded (Detail), and what to look for in the downstream (Search, with a link when the
// tools file gives one; nil when there is nothing to look for, or when the decision panel shows
// it as its first step). Empty members are not shown.
type Situation struct {
	Tone      NoticeKind
	Outcome   string
	WhyLabel  string
	Why       string
	Reconcile string
	Detail    string
	Search    *DownstreamSearch
}

// DownstreamSearch is what to look for in the downstream: the downstream's own reference once
// known, else the downstream key, else the call's details and when it was sent.
type DownstreamSearch struct {
	// Label says what Value is to the reader ("Search the downstream for").
	Label string
	Value string
	// What names Value for the copy button ("the downstream key"): "Copy the downstream key".
	What     string
	Hint     string
	Link     string
	LinkText string
}

// Timeline is an operation's history as the page reads it: Rows in order, people's decisions
// among them, and the events as recorded (Raw).
type Timeline struct {
	Rows []TimelineRow
	Raw  []RawEvent
}

// TimelineRow is one line of the timeline: an attempt with its outcome, a run of look-ups, a
// decision. Kind chooses its colour and icon; End is set for a run of several look-ups.
type TimelineRow struct {
	Kind    string
	At      Time
	End     *Time
	Title   string
	Actor   string
	From    string
	To      string
	Attempt int
	Count   int
	// Facts are the row's short facts (class, status, latency, the wait before it), IDs its
	// identifiers (request id, trace id), Note an error as recorded, Quote a person's reason.
	Facts []Detail
	IDs   []Detail
	Note  string
	Quote string
	// Approval marks an approval's row, or a proposal's: while the operation awaits approval,
	// the approvals box above quotes their reasons, and the row does not again; Pointer then
	// says where the reason is.
	Approval bool
	Pointer  string
}

// Detail is one named fact.
type Detail struct {
	Name  string
	Value string
}

// RawEvent is an event exactly as recorded.
type RawEvent struct {
	ID      string
	At      Time
	Type    string
	Actor   string
	From    string
	To      string
	Attempt string
	Detail  string
}

// ReviewInfo is one review of an operation.
type ReviewInfo struct {
	ID         string
	Reason     string
	Status     string
	Opened     Time
	OpenedBy   string
	Resolved   *Time
	ResolvedBy string
	Resolution string
}

// WorkflowPage lists one workflow run's operations in creation order.
type WorkflowPage struct {
	Page  Page
	RunID string
	Rows  []OperationRow
}

// AdminPage manages tenants, API keys and users.
type AdminPage struct {
	Page   Page
	Notice *NoticeText
	// NewKey is a key just created, shown this once; InviteLink a new user's invite link, also.
	NewKey     *NewKeyInfo
	InviteLink string
	// MayCreateTenants is false for an admin limited to tenants.
	MayCreateTenants bool
	Tenants          []TenantRow
	TenantOptions    []Option
	Keys             []KeyRow
	Users            []UserRow
	Roles            []Option
}

// NoticeText is a notice to show at the top of a page.
type NoticeText struct {
	Kind    NoticeKind
	Message string
	// NextHref and NextText, when set, lead on from the notice: the next review after a
	// decision.
	NextHref string
	NextText string
}

// NewKeyInfo is a freshly created API key.
type NewKeyInfo struct {
	Tenant    string
	Principal string
	Tools     string
	Secret    string
}

// TenantRow is one tenant.
type TenantRow struct {
	Name    string
	Created Time
}

// KeyRow is one API key, never its secret.
type KeyRow struct {
	ID        string
	Tenant    string
	Prefix    string
	Principal string
	Tools     string
	Created   Time
	Revoked   *Time
	// LastUsed is when the key last authenticated a request (to the minute); nil: never.
	LastUsed *Time
}

// UserRow is one console user.
type UserRow struct {
	ID       string
	Email    string
	Role     string
	Tenants  string
	Created  Time
	Disabled bool
}

// ClaimBox is the open review's claim and deadline on an operation page: "ravi@… has it · 27
// min left", with a form to take it or give it back (Action) for a reviewer who may, and an
// approval's "lapses in 23 h 56 min".
type ClaimBox struct {
	Text       string
	Mine, Free bool
	Action     string // where the take or give-back form posts; "" offers none
	CSRFToken  string
	Next       string
	Lapses     string
	LapsesSoon bool
}
