package views

// AuditPage is the audit log (docs/AUDIT.md): the chain's head, its last verification, a button to
// verify it now, and the entries within the user's tenants, newest first.
type AuditPage struct {
	Page   Page
	Notice *NoticeText
	// Broken names the first entry the last verification on this page found broken; "" when
	// it found none or none ran.
	Broken   string
	HeadSeq  string
	HeadHash string
	// HeadNote says why the head's number is past the newest entry listed (an older page,
	// filters, other tenants' entries); "" when the list starts at the head.
	HeadNote string
	// Verified is the last sound verification; nil when the chain was never verified.
	Verified *AuditVerification
	// Limited says the user sees only the entries of their tenants.
	Limited  bool
	Tenants  []Option
	Action   string
	Actor    string
	Actions  []string // suggestions for the action filter
	Filtered bool
	Rows     []AuditRow
	NextHref string
}

// AuditVerification is a chain head that a verification found sound.
type AuditVerification struct {
	Seq  string
	Hash string
	At   Time
	// Since counts the entries appended after it, not yet verified.
	Since string
}

// AuditRow is one audit entry, on the audit page and on the page of its operation.
type AuditRow struct {
	Seq           string
	At            Time
	Actor         string
	Action        string
	Tenant        string
	OperationID   string
	OperationHref string
	// OperationKey names the operation by its idempotency key; "" when unknown (purged, or
	// where the page is the operation's own).
	OperationKey string
	Outcome      string
	RequestID    string
	Hash         string
	Detail       []Detail
}

// ExportsPage is the form that downloads an export of operation histories.
type ExportsPage struct {
	Page    Page
	Formats []Option
	Tenants []Option
	States  []Option
	Tools   []Option
	From    string
	To      string
	Limited bool
	Error   string
	// Unsigned is set when the gateway has no audit signing key: its exports carry no
	// signature, which the page says before anyone downloads one.
	Unsigned bool
}
