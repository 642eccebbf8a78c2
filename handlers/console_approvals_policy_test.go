package handlers

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
)

// A policy rule's `approvals` replaces the tool's count of reviewers for the operations it held;
// an operation the policy let through, or none touched, keeps the tool's.
func TestRequiredApprovalsOfAPolicy(t *testing.T) {
	tool := &catalog.Tool{Review: catalog.ReviewPolicy{Approvals: 1}}
	assert.Equal(t, 1, requiredApprovals(&models.Operation{}, tool))
	held := &models.Operation{Policy: &models.PolicyDecision{Rule: "big", Decision: models.PolicyRequireApproval, Approvals: 2}}
	assert.Equal(t, 2, requiredApprovals(held, tool))
	byBudget := &models.Operation{Policy: &models.PolicyDecision{Decision: models.PolicyRequireApproval}}
	assert.Equal(t, 1, requiredApprovals(byBudget, tool), "a budget's hold keeps the tool's count")
}
