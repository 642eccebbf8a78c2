package sandbox

import (
	"net/http"
	"strings"
	"time"
)

// refund is money sent back to a customer: the sandbox's dangerous resource. Creation ignores
// idempotency keys on purpose, like many real payment back-ends, so every request that reaches
// it pays out again; after an ambiguous attempt only reconciliation can tell what happened.
type refund struct {
	ID          string    `json:"id"`
	Status      string    `json:"status"`
	OrderID     string    `json:"order_id"`
	AmountCents int64     `json:"amount_cents"`
	Currency    string    `json:"currency"`
	CardLast4   string    `json:"card_last4,omitempty"` // the full number is never kept
	Reference   string    `json:"reference"`            // see referenceOf
	Operation   string    `json:"operation"`            // X-Idemgate-Operation of the creating request
	CreatedAt   time.Time `json:"created_at"`
}

// createRefund answers POST /refunds.
func (s *Sandbox) createRefund(c call) reply {
	var in struct {
		OrderID     *string `json:"order_id"`
		AmountCents *int64  `json:"amount_cents"`
		Currency    *string `json:"currency"`
		CardNumber  string  `json:"card_number"`
	}
	if err := decodeObject(c.body, &in); err != nil {
		return errorReply(http.StatusBadRequest, err.Error())
	}
	switch {
	case in.OrderID == nil || strings.TrimSpace(*in.OrderID) == "":
		return errorReply(http.StatusBadRequest, "order_id is required")
	case in.AmountCents == nil:
		return errorReply(http.StatusBadRequest, "amount_cents is required")
	case *in.AmountCents < 1:
		return errorReply(http.StatusBadRequest, "amount_cents must be at least 1")
	case in.Currency == nil || strings.TrimSpace(*in.Currency) == "":
		return errorReply(http.StatusBadRequest, "currency is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &refund{
		ID:          s.newID("R", s.nextRefund),
		Status:      "issued",
		OrderID:     *in.OrderID,
		AmountCents: *in.AmountCents,
		Currency:    *in.Currency,
		CardLast4:   last4(in.CardNumber),
		Reference:   referenceOf(c.r),
		Operation:   c.r.Header.Get("X-Idemgate-Operation"),
		CreatedAt:   time.Now().UTC(),
	}
	s.nextRefund++
	s.refunds = append(s.refunds, r)
	return jsonReply(http.StatusCreated, r)
}

// findRefund answers GET /refunds: with ?reference=, the first refund made under that
// downstream key or by that operation; without it, every refund.
func (s *Sandbox) findRefund(c call) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	return findByReference(c, "refunds", s.refunds, func(r *refund) (string, string) { return r.Reference, r.Operation })
}

// getRefund answers GET /refunds/{id}.
func (s *Sandbox) getRefund(c call) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.refunds {
		if r.ID == c.id {
			return jsonReply(http.StatusOK, r)
		}
	}
	return errorReply(http.StatusNotFound, "not found")
}

// last4 keeps the last four digits of a card number. Numbers too short to be real cards are
// dropped entirely, since their last four digits could be the whole value.
func last4(card string) string {
	var digits []byte
	for i := 0; i < len(card); i++ {
		if card[i] >= '0' && card[i] <= '9' {
			digits = append(digits, card[i])
		}
	}
	if len(digits) < 8 {
		return ""
	}
	return string(digits[len(digits)-4:])
}
