package handlers

import (
	"math/big"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// stakes is what an operation puts at stake, in people's words: its tool's summary ("4,800.00
// EUR for order 7702"), the amount alone ("4,800.00 EUR"), both read from the masked params,
// and the downstream system it reaches. Empty members are unknown.
type stakes struct {
	Summary, Amount, Downstream string
	// Minor and Currency are the amount as a number, for totals; Minor is nil without one.
	Minor    *big.Int
	Currency string
}

// stakesOf reads op's stakes with its tool's rules; nothing when the tool is no longer in the
// catalogue (its masking is unknown) or the params are gone.
func stakesOf(cat *catalog.Catalog, op *models.Operation) stakes {
	return stakesFor(cat, op.Tool, op.Params, op.Key, op.Tenant)
}

// stakesFor reads the stakes of a call of toolName with params as stored (nil when purged),
// under key for tenant: the one reading for the operation page and bulk decisions.
func stakesFor(cat *catalog.Catalog, toolName string, params *string, key, tenant string) stakes {
	tool, known := cat.Get(toolName)
	if !known {
		return stakes{}
	}
	s := stakes{Downstream: tool.Downstream()}
	if params == nil {
		return s
	}
	masked, err := tool.RevealCanonical([]byte(*params)) // safe forms for people: "•••• 4242"
	if err != nil {
		return s
	}
	if text, ok := tool.Summary(masked, key, tenant); ok {
		s.Summary = text
	}
	if n, cur, ok := tool.Amount(masked); ok {
		s.Amount, s.Minor, s.Currency = catalog.Money(n.String(), cur), n, cur
	}
	return s
}

// buttonFor names a decision's button after what it decides on: "Approve 4,800.00 EUR".
func (s stakes) buttonFor(verb string) string {
	if s.Amount == "" {
		return verb
	}
	return verb + " " + s.Amount
}
