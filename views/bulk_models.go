package views

// BulkBar is the bar above a list that starts a bulk decision: the selected rows (their
// checkboxes belong to its form), or all matching the list's filter.
type BulkBar struct {
	// Action is where the bar posts: /bulk/review with the list's filter as its query.
	Action    string
	List      string // "reviews" or "operations": the list the selection comes from
	CSRFToken string
	Actions   []Option
	// All labels the "all matching this filter" choice, with the count when known.
	All string
}

// BulkFormID is the id of the bulk bar's form, which the rows' checkboxes name.
const BulkFormID = "bulk-form"

// BulkPage is a bulk decision: before it is applied, the confirmation (Prepared); after, the
// result.
type BulkPage struct {
	Page     Page
	ID       string
	Action   string // its label ("Mark failed")
	Explain  string // what it does to each operation
	Prepared bool
	Notice   *NoticeText
	// Left says what was selected but is not part of the decision, a sentence each.
	Left []string
	// LookAlikes names, a sentence each, the selected operations that share a tool and params
	// under different keys: approving all of them may do one thing twice.
	LookAlikes []string
	Rows       []BulkRow
	// AtStake is the total amount of the operations whose summaries give one, per currency
	// ("9,600.00 EUR + 120.00 USD"), and Priced how many of the rows that covers; "" when none.
	AtStake string
	Priced  int
	// The confirmation's form.
	ApplyURL  string
	CSRFToken string
	Reason    string // kept after a refused apply
	// Risk, for a retry, names the tools that cannot recognise a repeat; the form then asks
	// for a second, explicit choice. Others counts the operations of the retry that can
	// recognise one (leaving the risky ones out is offered only when there are some), and
	// Unchanged those still as they were selected (what the button counts).
	Risk      []string
	Others    int
	Unchanged int
	// Tone is the apply button's (TonePrimary, ToneNeutral, ToneDanger): a risky retry, a
	// mark failed or a reject is dangerous, and looks it.
	Tone string
	// The result.
	Done, Refused, Untried int
	By                     string
	When                   Time
	AppliedReason          string
	Stopped                bool // the apply stopped half-way: some were not tried
	// LiveSrc answers the result's version (LiveVersion when rendered): the result page asks
	// it every few seconds and shows itself again when its operations moved on (a look-up
	// answered, a retry ended), the rows' "Now" and "What it saw" as they are.
	LiveSrc, LiveVersion string
	// OneTenant hides the tenant column: a viewer of one tenant learns nothing from it.
	OneTenant bool
}

// BulkRow is one operation of a bulk decision.
type BulkRow struct {
	Href    string
	Key     string
	Tool    string
	Tenant  string
	State   string // as when the reviewer selected it
	Outcome string // done, refused or "" (not tried)
	Message string
	ID      string
	// Summary says what the operation does, from its tool's summary ("4,800.00 EUR for order
	// 7702"); "" when the tool has none.
	Summary string
	// Evidence says what its attempts and look-ups saw, in parts ("14 look-ups told nothing
	// either way (HTTP 500)", "1 attempt", "timeout"), as the queue does; none when nothing was
	// tried.
	Evidence []string
	// Now is its state as the page was made, on the result page: what the decision led to.
	Now string
	// LookupURL, when the tool's file gives a reference_url, looks the operation up in the
	// downstream's own console: what a reviewer checks before deciding on many.
	LookupURL string
}
