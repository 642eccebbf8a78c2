package handlers

import (
	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// stakes is what an operation puts at stake, in people's words: its tool's summary ("4,800.00
// EUR for order 7702"), the amount alone ("4,800.00 EUR"), both read from the masked params,
// and the downstream system it reaches. Empty members are unknown.
type stakes struct {
	Summary, Amount, Downstream string
}

// stakesOf reads op's stakes with its tool's rules; nothing when the tool is no longer in the
// catalogue (its masking is unknown) or the params are gone.
func stakesOf(cat *catalog.Catalog, op *models.Operation) stakes {
	tool, known := cat.Get(op.Tool)
	if !known {
		return stakes{}
	}
	s := stakes{Downstream: tool.Downstream()}
	if op.Params == nil {
		return s
	}
	masked, err := tool.MaskCanonical([]byte(*op.Params))
	if err != nil {
		return s
	}
	if text, ok := tool.Summary(masked, op.Key, op.Tenant); ok {
		s.Summary = text
	}
	if n, cur, ok := tool.Amount(masked); ok {
		s.Amount = catalog.Money(n.String(), cur)
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
