package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/idemgate/idemgate/jobs/catalog"
	"github.com/idemgate/idemgate/models"
	"github.com/idemgate/idemgate/models/fingerprint"
)

// CompensationKeyPrefix starts the operation keys the gateway gives compensations. It is
// reserved (docs/API.md): an agent may not choose such a key, or it could take the key of a
// compensation a reviewer has yet to propose.
const CompensationKeyPrefix = "compensate:"

// CompensationKey is the default operation key of the compensation of operation id.
func CompensationKey(id string) string { return CompensationKeyPrefix + id }

// ReservedKey reports whether key is one of the gateway's own, which agents may not use.
func ReservedKey(key string) bool { return strings.HasPrefix(key, CompensationKeyPrefix) }

// Compensable decides whether original can be compensated, and returns the tool that undoes
// it. It is the one rule the API, the console's action and its action panel use: the ledger's
// (models.Operation.CompensationRefusal) and the catalogue's (the tool declares a compensation,
// and the compensating tool is still in the catalogue). A refusal is models.CodeNotCompensable,
// carrying original.
func Compensable(cat *catalog.Catalog, original *models.Operation) (*catalog.Tool, error) {
	tool, ok := cat.Get(original.Tool)
	if !ok || tool.Compensation == nil {
		return nil, notCompensable(original, "tool %s declares no compensation", original.Tool)
	}
	if err := original.CompensationRefusal(); err != nil {
		return nil, err
	}
	target, ok := cat.Get(tool.Compensation.Tool)
	if !ok {
		return nil, notCompensable(original, "the compensation tool %s is not in the catalogue", tool.Compensation.Tool)
	}
	return target, nil
}

// CompensationCall builds the call that undoes original from its tool's compensation template:
// the compensating tool and canonical params, validated against that tool's schema. The
// template sees original's params as its downstream received them (opened, when sealed). An
// operation that cannot be compensated (Compensable) is models.CodeNotCompensable, carrying
// it. An operation already compensated still yields its call, so that a repeated request
// replays the same compensation; the ledger refuses a second, different one when linking.
func (e *Executor) CompensationCall(original *models.Operation) (*catalog.Tool, []byte, error) {
	cat := e.catalog
	target, err := Compensable(cat, original)
	if err != nil {
		return nil, nil, err
	}
	refuse := func(format string, args ...any) error { return notCompensable(original, format, args...) }
	tool, _ := cat.Get(original.Tool)
	data := catalog.TemplateData{OperationID: original.ID, DownstreamKey: original.DownstreamKeySent(), Key: original.Key, Tenant: original.Tenant}
	clear, err := e.ledger.Params(original)
	if err != nil {
		return nil, nil, refuse("the operation's params cannot be read: %v", err)
	}
	data.Params, _ = decodeObject(clear)
	if original.Result != nil {
		data.Result, _ = decodeObject([]byte(*original.Result)) // a non-object result offers no fields
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

func notCompensable(op *models.Operation, format string, args ...any) error {
	return &models.Error{Code: models.CodeNotCompensable, Op: op, Message: fmt.Sprintf(format, args...)}
}

// ProposeCompensation records, on a reviewer's request (by, with a reason), the compensation of
// original in AWAITING_APPROVAL, with the proposal's audit entry in the same transaction:
// another reviewer must approve it (four eyes) before it runs through the same pipeline as any
// operation. A second proposal returns the same operation. When the compensation's key is
// held by an operation that is not original's compensation (recorded before the prefix was
// reserved), nothing is proposed: models.CodeNotCompensable.
func (e *Executor) ProposeCompensation(ctx context.Context, original *models.Operation, by models.Requester, reason string) (*models.Operation, error) {
	tool, params, err := e.CompensationCall(original)
	if err != nil {
		return nil, err
	}
	key := CompensationKey(original.ID)
	in, err := e.newOperation(original.Tenant, key, tool, params)
	if err != nil {
		return nil, err
	}
	in.PrincipalID, in.WorkflowRunID, in.Compensates, in.Actor, in.ActorUserID = by.Actor, deref(original.WorkflowRunID), original.ID, by.Actor, by.UserID
	in.NeedsApproval, in.ReviewReason, in.Reason = true, models.ReasonCompensationApproval, reason
	in.Audit = func(op *models.Operation) models.AuditInput {
		return models.AuditInput{Actor: by.Actor, Action: models.AuditProposeCompensation, Tenant: op.Tenant,
			OperationID: original.ID, Outcome: models.OutcomeOK, RequestID: by.RequestID,
			Detail: map[string]any{"reason": reason, "compensation": op.ID, "tool": op.Tool}}
	}
	s, err := e.ledger.Submit(ctx, in)
	switch code := models.ErrorCode(err); {
	case code == models.CodeKeyMismatch || code == models.CodeKeyExpired ||
		(err == nil && (s.Op.Compensates == nil || *s.Op.Compensates != original.ID)):
		return nil, &models.Error{Code: models.CodeNotCompensable, Op: original, Err: err,
			Message: "the key " + key + " of this operation's compensation is already taken by another operation, " +
				"so no compensation can be proposed here; compensate it by hand in the downstream"}
	case err != nil:
		return nil, err
	}
	return s.Op, nil
}

func decodeNumbers(raw []byte) any {
	m, err := decodeObject(raw)
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
