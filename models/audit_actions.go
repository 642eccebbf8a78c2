package models

import "strings"

// The audit log's outcomes: the request was carried out, refused (nothing changed), or failed
// part-way.
const (
	OutcomeOK      = "ok"
	OutcomeRefused = "refused"
	OutcomeFailed  = "failed"
)

// Audit actions recorded outside the ledger's own rules (review actions are "review.<name>",
// exports "export.created"). Administrative changes name the record and the verb; refused
// console requests start with "console.".
const (
	AuditTenantCreate = "tenant.create"
	AuditAPIKeyCreate = "apikey.create"
	AuditAPIKeyRevoke = "apikey.revoke"
	AuditUserCreate   = "user.create"
	// AuditDataKeyRotate records `idemgate datakey rotate`: the key id and what it sealed.
	AuditDataKeyRotate = "datakey.rotate"

	// AuditProposeCompensation records a reviewer's proposal of a compensation, on the
	// operation it would undo.
	AuditProposeCompensation = "review.propose_compensation"

	// AuditLoginFailed is a refused sign-in: a wrong email or password, or too many of them.
	AuditLoginFailed = "console.login"
	// AuditCSRFRefused is a console form post whose CSRF token was missing or wrong.
	AuditCSRFRefused = "console.csrf"
	// AuditForbidden is a console request the user's role or scope does not allow.
	AuditForbidden = "console.forbidden"

	// AuditRefusalsDropped sums up the refused requests that were not recorded one by one,
	// because too many came from one address or from all together.
	AuditRefusalsDropped = "audit.refusals_dropped"
)

// ActorCLI is the actor of changes made with the idemgate command.
const ActorCLI = "cli"

// ActorGateway is the actor of the entries the gateway writes about itself.
const ActorGateway = "gateway"

// AnonymousActor is the actor of a request nobody is signed in for, named by its address.
func AnonymousActor(ip string) string { return "anonymous:" + ip }

// createdAudit is the audit entry of u's creation by by: email, role and tenants, never the
// password. A user limited to exactly one tenant is that tenant's entry, so its auditors see it;
// any other is visible to auditors of every tenant only.
func (u *User) createdAudit(by Requester) AuditInput {
	return by.entry(AuditUserCreate, u.auditTenant(), map[string]any{"email": u.Email, "role": string(u.Role), "tenants": u.tenantsWord()})
}

// tenantsWord is u's tenants as the audit log spells them: a list, or "every tenant".
func (u *User) tenantsWord() string {
	if list := u.TenantList(); list != nil {
		return strings.Join(list, ",")
	}
	return "every tenant"
}

// auditTenant is the tenant an entry about u belongs to: the one tenant u is limited to, so
// its auditors see it; "" (auditors of every tenant only) for any other user.
func (u *User) auditTenant() string {
	if list := u.TenantList(); len(list) == 1 {
		return list[0]
	}
	return ""
}
