// Package models is the ledger: the durable record of every operation, and the one place that
// decides what may change in it and how.
//
// It holds the schema and its migrations, the states of docs/STATES.md and their legal transitions
// (state.go, transition.go: every change is one compare-and-set on the current state, and on
// the fencing token where a worker writes, committed with its event), claims and leases
// (ledger.go, attempts.go, recovery.go), reviews and reviewers' actions, the tamper-evident
// audit chain, the webhook outbox written in the transaction of the change it announces,
// users, sessions and API keys. Exported functions open the transactions they need; database
// errors are translated at this boundary into *Error with a Code (errors.go), which the
// handlers' one table turns into answers.
//
// Every console read and change takes a Scope, so tenants never see each other's records; the
// zero Scope sees nothing, and every tenant is asked for by name (AllTenants). Admin changes
// write their audit entry in their own transaction.
// models imports none of idemgate's other packages but its own subpackages.
package models
