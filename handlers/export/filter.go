package export

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/idemgate/idemgate/models"
)

// Filter selects the operations an export holds, within the scope of its Request. Zero fields
// do not filter. It is recorded, as JSON, in the export's audit entry and trailer, so a reader
// knows what the file claims to contain.
type Filter struct {
	// Tenant narrows the export to one tenant within the scope.
	Tenant string `json:"tenant,omitempty"`
	// From and To bound the operations' created_at: From inclusive, To exclusive.
	From  time.Time    `json:"from,omitzero"`
	To    time.Time    `json:"to,omitzero"`
	State models.State `json:"state,omitempty"`
	Tool  string       `json:"tool,omitempty"`
}

// normalized returns f with its times in UTC at the ledger's precision, so the recorded filter
// is the one applied.
func (f Filter) normalized() Filter {
	if !f.From.IsZero() {
		f.From = f.From.UTC().Truncate(time.Microsecond)
	}
	if !f.To.IsZero() {
		f.To = f.To.UTC().Truncate(time.Microsecond)
	}
	return f
}

// validate refuses a filter that cannot mean anything.
func (f Filter) validate() error {
	if f.State != "" && !f.State.Valid() {
		return fmt.Errorf("export: unknown state %q", f.State)
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return fmt.Errorf("export: the time range is empty: from %s is not before to %s",
			f.From.UTC().Format(time.RFC3339), f.To.UTC().Format(time.RFC3339))
	}
	return nil
}

func (f Filter) ledger() models.ExportFilter {
	return models.ExportFilter{Tenant: f.Tenant, From: f.From, To: f.To, State: f.State, Tool: f.Tool}
}

// recordedFilter is the filter as the audit entry and the trailer record it: with the tenants
// of a limited scope first, so a reader knows the file holds only theirs.
type recordedFilter struct {
	Tenants []string `json:"tenants,omitzero"`
	Filter
}

// record encodes f, within scope s, as it is recorded.
func (f Filter) record(s models.Scope) ([]byte, error) {
	r := recordedFilter{Filter: f}
	if !s.Unlimited() {
		r.Tenants = s.Tenants()
		if r.Tenants == nil {
			r.Tenants = []string{}
		}
	}
	return json.Marshal(r)
}
