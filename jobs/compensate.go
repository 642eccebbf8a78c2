package jobs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/fingerprint"
)

// CompensationKey is the default operation key of the compensation of operation id.
func CompensationKey(id string) string { return "compensate:" + id }

// CompensationCall builds the call that undoes original from its tool's compensation template:
// the compensating tool and canonical params, validated against that tool's schema. An
// operation that cannot be compensated is models.CodeNotCompensable, carrying it. An
// operation already compensated still yields its call, so that a repeated request replays the
// same compensation; the ledger refuses a second, different one when linking.
func CompensationCall(cat *catalog.Catalog, original *models.Operation) (*catalog.Tool, []byte, error) {
	refuse := func(format string, args ...any) error {
		return &models.Error{Code: models.CodeNotCompensable, Op: original, Message: fmt.Sprintf(format, args...)}
	}
	tool, ok := cat.Get(original.Tool)
	switch {
	case !ok || tool.Compensation == nil:
		return nil, nil, refuse("tool %s declares no compensation", original.Tool)
	case original.State != models.StateSucceeded:
		return nil, nil, refuse("only SUCCEEDED operations can be compensated; this one is %s", original.State)
	case original.Params == nil:
		return nil, nil, refuse("the operation's record passed its retention; its compensation cannot be built")
	}
	target, ok := cat.Get(tool.Compensation.Tool)
	if !ok {
		return nil, nil, refuse("the compensation tool %s is not in the catalogue", tool.Compensation.Tool)
	}
	data := catalog.TemplateData{OperationID: original.ID, Key: original.Key, Tenant: original.Tenant}
	data.Params, _ = decodeObject(original.Params)
	if original.Result != nil {
		data.Result, _ = decodeObject(original.Result) // a non-object result offers no fields
	}
	rendered, err := tool.RenderCompensation(data)
	if err != nil {
		return nil, nil, refuse("rendering the compensation template: %v", err)
	}
	raw, err := json.Marshal(rendered)
	if err != nil {
		return nil, nil, refuse("encoding the compensation params: %v", err)
	}
	params, err := fingerprint.Normalize(raw)
	if err != nil {
		return nil, nil, refuse("the compensation params: %v", err)
	}
	if errs := target.ValidateParams(decodeNumbers(params)); len(errs) > 0 {
		return nil, nil, refuse("the compensation params do not match %s: %s %s", target.Name, errs[0].Pointer, errs[0].Message)
	}
	return target, params, nil
}

// ProposeCompensation records, on a reviewer's request, the compensation of original in
// AWAITING_APPROVAL: another reviewer must approve it (four eyes) before it runs through the
// same pipeline as any operation. A second proposal returns the same operation.
func (e *Executor) ProposeCompensation(ctx context.Context, original *models.Operation, actor string) (*models.Operation, error) {
	tool, params, err := CompensationCall(e.catalog, original)
	if err != nil {
		return nil, err
	}
	s, err := e.ledger.Submit(ctx, models.NewOperation{
		Tenant: original.Tenant, PrincipalID: actor, Key: CompensationKey(original.ID), Tool: tool.Name,
		Fingerprint: fingerprint.Of(tool.Name, params), Params: params,
		WorkflowRunID: deref(original.WorkflowRunID), Compensates: original.ID,
		NeedsApproval: true, ReviewReason: models.ReasonCompensationApproval, Actor: actor,
	})
	if err != nil {
		return nil, err
	}
	return s.Op, nil
}

func decodeNumbers(raw []byte) any {
	var s = string(raw)
	m, err := decodeObject(&s)
	if err != nil {
		return nil
	}
	return m
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
