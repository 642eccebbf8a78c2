package views

// NoticeKind says what a notice reports, and so how it looks and how urgently it is announced.
type NoticeKind string

// The kinds of notice.
const (
	NoticeInfo    NoticeKind = "info"
	NoticeSuccess NoticeKind = "success"
	NoticeWarning NoticeKind = "warning"
	NoticeError   NoticeKind = "error"
)

// normal returns the kind, or NoticeInfo for a kind this package does not know.
func (k NoticeKind) normal() NoticeKind {
	switch k {
	case NoticeSuccess, NoticeWarning, NoticeError:
		return k
	default:
		return NoticeInfo
	}
}

// urgent reports whether the notice should interrupt a screen reader.
func (k NoticeKind) urgent() bool {
	return k == NoticeError || k == NoticeWarning
}

// stateClasses maps each operation state (docs/STATES.md) to its badge class.
var stateClasses = map[string]string{
	"PENDING":           "badge--pending",
	"AWAITING_APPROVAL": "badge--awaiting-approval",
	"RUNNING":           "badge--running",
	"SUCCEEDED":         "badge--succeeded",
	"FAILED_FINAL":      "badge--failed-final",
	"UNKNOWN":           "badge--unknown",
}

// stateLabels name the states in words, for people; the code stays in the badge's title.
var stateLabels = map[string]string{
	"PENDING":           "Pending",
	"AWAITING_APPROVAL": "Awaiting approval",
	"RUNNING":           "Running",
	"SUCCEEDED":         "Succeeded",
	"FAILED_FINAL":      "Failed",
	"UNKNOWN":           "Outcome unknown",
}

// StateLabel names a state in words ("Awaiting approval"); a state this package does not know
// is named by its code.
func StateLabel(state string) string {
	if l, ok := stateLabels[state]; ok {
		return l
	}
	return state
}

// stateShort names a state in a word where width is short: "Unknown" for the outcome unknown.
func stateShort(state string) string {
	if state == "UNKNOWN" {
		return "Unknown"
	}
	return StateLabel(state)
}

// badgeClass returns the classes of a state's badge. A state this package does not know is shown
// as a plain badge.
func badgeClass(state string) string {
	if c, ok := stateClasses[state]; ok {
		return "badge badge--state " + c
	}
	return "badge"
}
