package models

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// migration is one step of the versioned schema. Steps are append-only: a released step is
// never edited, a change is a new step. The SQL is shared by both engines; the few spellings
// that differ are written as placeholders (see dialectSQL).
type migration struct {
	version int
	name    string
	sql     string
}

// indexSteps are the steps that are one CREATE INDEX, by the index's name: built CONCURRENTLY
// on PostgreSQL ({{concurrently}} in the SQL). Such a build cannot run in a transaction, so the
// step runs alone, after the steps before it have committed, and writers go on meanwhile.
var indexSteps = map[int]string{23: "operations_lookalike"}

// expands are the steps that only add what the binaries of older schemas ignore (columns,
// tables, indexes built CONCURRENTLY), by the oldest schema that still runs on a ledger they
// have migrated. Every other step serves only binaries of its own schema. The rule for new
// steps is in docs/OPERATIONS.md ("Upgrading"): expand, then contract one release later.
var expands = map[int]int{22: 21, 23: 22, 24: 22, 25: 22, 26: 22, 27: 22, 28: 22, 29: 22}

// dialectSteps are the statements of a step written in each engine's own language, run after
// its shared SQL, each whole: a trigger's body holds semicolons that splitStatements would cut.
var dialectSteps = map[int]func(Dialect) []string{29: budgetCounterTriggers}

// servesFrom is the oldest schema a binary may know and still run on a ledger migrated by
// step m.
func (m migration) servesFrom() int {
	if from, ok := expands[m.version]; ok {
		return from
	}
	return m.version
}

var migrations = []migration{
	{1, "ledger", `
CREATE TABLE tenants (
	name       TEXT PRIMARY KEY,
	created_at {{ts}} NOT NULL
);
CREATE TABLE principals (
	id         TEXT PRIMARY KEY,
	tenant     TEXT NOT NULL REFERENCES tenants(name),
	name       TEXT NOT NULL,
	created_at {{ts}} NOT NULL,
	UNIQUE (tenant, name)
);
CREATE TABLE api_keys (
	id           TEXT PRIMARY KEY,
	tenant       TEXT NOT NULL REFERENCES tenants(name),
	principal_id TEXT NOT NULL REFERENCES principals(id),
	prefix       TEXT NOT NULL,
	hash         TEXT NOT NULL UNIQUE,
	tools        TEXT NOT NULL,
	created_at   {{ts}} NOT NULL,
	revoked_at   {{ts}}
);
CREATE INDEX api_keys_prefix ON api_keys (prefix);
CREATE TABLE operations (
	id                TEXT PRIMARY KEY,
	tenant            TEXT NOT NULL REFERENCES tenants(name),
	op_key            TEXT NOT NULL,
	tool              TEXT NOT NULL,
	fingerprint       TEXT NOT NULL,
	params            TEXT,
	result            TEXT,
	state             TEXT NOT NULL,
	error_class       TEXT,
	error_message     TEXT,
	downstream_status INTEGER,
	downstream_ref    TEXT,
	attempts          INTEGER NOT NULL DEFAULT 0,
	ambiguous         BOOLEAN NOT NULL DEFAULT FALSE,
	next_attempt_at   {{ts}},
	lease_owner       TEXT,
	lease_expires_at  {{ts}},
	fence             BIGINT NOT NULL DEFAULT 0,
	principal_id      TEXT NOT NULL,
	api_key_id        TEXT NOT NULL,
	workflow_run_id   TEXT,
	step_id           TEXT,
	compensates       TEXT,
	compensated_by    TEXT,
	review_id         TEXT,
	unknown_since     {{ts}},
	created_at        {{ts}} NOT NULL,
	updated_at        {{ts}} NOT NULL,
	completed_at      {{ts}},
	purged_at         {{ts}},
	UNIQUE (tenant, op_key)
);
CREATE INDEX operations_due ON operations (state, next_attempt_at);
CREATE INDEX operations_tenant_list ON operations (tenant, id);
CREATE INDEX operations_workflow ON operations (tenant, workflow_run_id);
CREATE TABLE attempts (
	id                TEXT PRIMARY KEY,
	operation_id      TEXT NOT NULL REFERENCES operations(id),
	number            INTEGER NOT NULL,
	fence             BIGINT NOT NULL,
	worker            TEXT NOT NULL,
	started_at        {{ts}} NOT NULL,
	finished_at       {{ts}},
	class             TEXT,
	downstream_status INTEGER,
	latency_ms        BIGINT,
	error             TEXT,
	trace_id          TEXT,
	UNIQUE (operation_id, number)
);
CREATE TABLE events (
	id           {{serial}},
	operation_id TEXT NOT NULL REFERENCES operations(id),
	tenant       TEXT NOT NULL,
	at           {{ts}} NOT NULL,
	type         TEXT NOT NULL,
	from_state   TEXT,
	to_state     TEXT,
	attempt      INTEGER,
	actor        TEXT NOT NULL,
	detail       TEXT
);
CREATE INDEX events_operation ON events (operation_id, id);
CREATE TABLE settings (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
`},
	{2, "recovery", `
ALTER TABLE operations ADD COLUMN probes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE operations ADD COLUMN next_probe_at {{ts}};
CREATE INDEX operations_lease ON operations (state, lease_expires_at);
CREATE INDEX operations_probe ON operations (state, next_probe_at);
CREATE INDEX operations_retention ON operations (tool, completed_at) WHERE purged_at IS NULL AND completed_at IS NOT NULL;
CREATE TABLE reviews (
	id           TEXT PRIMARY KEY,
	tenant       TEXT NOT NULL REFERENCES tenants(name),
	operation_id TEXT NOT NULL REFERENCES operations(id),
	reason       TEXT NOT NULL,
	status       TEXT NOT NULL,
	opened_at    {{ts}} NOT NULL,
	opened_by    TEXT NOT NULL,
	resolved_at  {{ts}},
	resolved_by  TEXT,
	resolution   TEXT
);
CREATE INDEX reviews_queue ON reviews (status, opened_at);
CREATE UNIQUE INDEX reviews_one_open ON reviews (operation_id) WHERE status = 'open';
`},
	{3, "console", `
CREATE TABLE users (
	id            TEXT PRIMARY KEY,
	email         TEXT NOT NULL UNIQUE,
	password_hash TEXT NOT NULL,
	role          TEXT NOT NULL,
	tenants       TEXT NOT NULL DEFAULT '',
	created_at    {{ts}} NOT NULL,
	disabled_at   {{ts}}
);
CREATE TABLE user_sessions (
	id         TEXT PRIMARY KEY,
	user_id    TEXT NOT NULL REFERENCES users(id),
	created_at {{ts}} NOT NULL,
	ended_at   {{ts}}
);
CREATE TABLE login_failures (
	id        {{serial}},
	email     TEXT NOT NULL,
	client_ip TEXT NOT NULL,
	at        {{ts}} NOT NULL
);
CREATE INDEX login_failures_email ON login_failures (email, at);
CREATE INDEX login_failures_ip ON login_failures (client_ip, at);
CREATE INDEX login_failures_at ON login_failures (at);
CREATE INDEX attempts_started ON attempts (started_at);
CREATE INDEX events_type_at ON events (type, at);
CREATE INDEX operations_created ON operations (tenant, created_at);
CREATE INDEX reviews_operation ON reviews (operation_id);
`},
	{4, "audit", `
CREATE TABLE audit_log (
	seq          BIGINT PRIMARY KEY,
	at           {{ts}} NOT NULL,
	actor        TEXT NOT NULL,
	action       TEXT NOT NULL,
	tenant       TEXT NOT NULL,
	operation_id TEXT NOT NULL,
	outcome      TEXT NOT NULL,
	request_id   TEXT NOT NULL,
	detail       TEXT NOT NULL,
	prev_hash    TEXT NOT NULL,
	hash         TEXT NOT NULL
);
CREATE INDEX audit_log_operation ON audit_log (operation_id);
CREATE INDEX audit_log_tenant_at ON audit_log (tenant, at);
`},
	{5, "webhooks", webhooksSchema},
	// The ledger's key is generated by this step, inside the migration's lock: replicas
	// starting at once run it once between them, and every later start only reads it.
	{6, "secrets", `
ALTER TABLE operations ADD COLUMN downstream_key TEXT;
ALTER TABLE operations ADD COLUMN params_sealed TEXT;
CREATE INDEX operations_sealed ON operations (id) WHERE params_sealed IS NOT NULL;
INSERT INTO settings (name, value) VALUES ('` + ledgerKeySetting + `', '{{new_ledger_key}}') ON CONFLICT DO NOTHING;
`},
	{7, "webhook retention", webhookRetentionSchema},
	// Users who sign in through an OpenID Connect provider are known by the provider's issuer
	// and subject, never by their email alone (a provider may let anyone claim any address).
	// Local users keep '' in both. A sign-in's state is recorded once used, so a replayed
	// callback is refused even with a copy of the browser's cookie.
	{8, "single sign-on", `
ALTER TABLE users ADD COLUMN issuer TEXT NOT NULL DEFAULT '';
ALTER TABLE users ADD COLUMN subject TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX users_federated ON users (issuer, subject) WHERE issuer <> '';
CREATE TABLE sso_states (
	id      TEXT PRIMARY KEY,
	used_at {{ts}} NOT NULL
);
CREATE INDEX sso_states_used ON sso_states (used_at);
`},
	// A claim is a note on an open review ("Ann has it until 14:30"), not a lock: anyone may
	// still act, so an absent claimant never blocks an incident.
	{9, "review deadlines and claims", `
ALTER TABLE reviews ADD COLUMN expiry_warned_at {{ts}};
ALTER TABLE reviews ADD COLUMN claimed_by TEXT;
ALTER TABLE reviews ADD COLUMN claimed_until {{ts}};
`},
	{10, "hot path", hotPathSchema},
	// When a key was last used, to the minute (Ledger.Authenticate), so that an admin sees
	// which keys are idle before revoking them.
	{11, "api key last use", `ALTER TABLE api_keys ADD COLUMN last_used_at {{ts}};`},
	{12, "console search and saved views", searchSchema},
	// A bulk decision (the console): the operations a reviewer selected, with the state and
	// attempt count each had when the reviewer confirmed (what "changed meanwhile" is judged
	// against), and each one's outcome once applied. The decisions themselves are the
	// operations' own review actions and audit entries; this only remembers the run.
	{13, "bulk decisions", `
CREATE TABLE bulk_decisions (
	id         TEXT PRIMARY KEY,
	actor      TEXT NOT NULL,
	action     TEXT NOT NULL,
	status     TEXT NOT NULL,
	reason     TEXT,
	left_out   INTEGER NOT NULL DEFAULT 0,
	unseen     INTEGER NOT NULL DEFAULT 0,
	capped     BOOLEAN NOT NULL DEFAULT FALSE,
	created_at {{ts}} NOT NULL,
	applied_at {{ts}}
);
CREATE INDEX bulk_decisions_actor ON bulk_decisions (actor, created_at);
CREATE TABLE bulk_decision_items (
	bulk_id           TEXT NOT NULL REFERENCES bulk_decisions(id),
	seq               INTEGER NOT NULL,
	operation_id      TEXT NOT NULL,
	tenant            TEXT NOT NULL,
	op_key            TEXT NOT NULL,
	tool              TEXT NOT NULL,
	expected_state    TEXT NOT NULL,
	expected_attempts INTEGER NOT NULL,
	outcome           TEXT NOT NULL DEFAULT '',
	message           TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (bulk_id, seq)
);
`},
	// Tenant secrets ({tenant: NAME} in a connection, docs/TOOLS.md): sealed under the data key,
	// bound to the tenant and the name, never stored in clear.
	{14, "tenant secrets", `
CREATE TABLE tenant_secrets (
	tenant TEXT NOT NULL REFERENCES tenants(name),
	name   TEXT NOT NULL,
	sealed TEXT NOT NULL,
	set_at {{ts}} NOT NULL,
	PRIMARY KEY (tenant, name)
);
`},
	// People by their stable user id (Person): a claim's holder and a bulk decision's owner,
	// beside the actor (user:<email>) kept for people to read. Rows from before are compared
	// by actor.
	{15, "people by user id", `
ALTER TABLE reviews ADD COLUMN claimed_by_id TEXT;
ALTER TABLE bulk_decisions ADD COLUMN actor_id TEXT NOT NULL DEFAULT '';
`},
	// The agent's reason for an operation (docs/API.md justification), masked, for reviewers; NULL
	// when none was given, so a new operation without one writes nothing more.
	{16, "justification", `ALTER TABLE operations ADD COLUMN justification TEXT;`},
	// The whole answer of an MCP server's tool (docs/MCP.md: content, structuredContent, isError),
	// which idemgate's /mcp replays as it came; result keeps what the JSON API answers. NULL
	// for HTTP tools, so their operations write nothing more.
	{17, "upstream result", `ALTER TABLE operations ADD COLUMN upstream_result TEXT;`},
	// The events flush asks which changed operations a waiter of another replica watches
	// (models/flush.go). On the primary key alone, a generic plan made while the ledger was
	// empty read the whole table in every state-changing transaction (issue 27: 36,386
	// sequential scans for 25,000 operations); this index holds only the watched rows, so
	// every plan of that question reads it, and an operation nobody watches costs it nothing.
	{18, "watched operations", `CREATE INDEX operations_watched ON operations (id) WHERE watched;`},
	// events_type_at served one query, the dashboard's reconcile probes by hour, yet every
	// event of every operation entered it: four index entries per new operation for no reader.
	// Partial on the one type that query reads (it names the type as a constant, so every plan
	// proves the predicate); a new operation's events no longer maintain it.
	{19, "reconcile events by time", `
DROP INDEX events_type_at;
CREATE INDEX events_reconcile_at ON events (at) WHERE type = 'reconcile_finished';
`},
	// Requests that came again with an operation's key and params (models/repeats.go), counted
	// per operation and written in batches; times in Unix nanoseconds, which both engines
	// compare as numbers when two processes add to one row.
	{20, "repeated requests", `
CREATE TABLE operation_repeats (
	operation_id TEXT PRIMARY KEY,
	tenant       TEXT NOT NULL,
	n            BIGINT NOT NULL,
	first_ns     BIGINT NOT NULL,
	last_ns      BIGINT NOT NULL
);
`},
	// The audit signing key (models/audit_keys.go). From this step on, new audit entries are
	// hashed in the canonical form (models/audit.go); the entries before keep their hashes.
	{21, "audit signing keys", auditKeysSchema},
	// Each step now records the oldest schema it still serves, so that a binary finding a
	// ledger newer than it knows can tell whether it may go on (a rolling upgrade: expand
	// first, contract one release later). Only adds a column: schema 21 binaries ignore it.
	{22, "rolling upgrades", `ALTER TABLE schema_migrations ADD COLUMN serves_from INTEGER`},
	// Look-alikes (docs/CONSOLE.md): a tenant's other operations of the same tool and params
	// (the fingerprint) in the last day, shown to reviewers. Built CONCURRENTLY: operations is
	// the ledger's largest table and takes writes throughout an upgrade.
	{23, "look-alikes", `CREATE INDEX {{concurrently}} IF NOT EXISTS operations_lookalike ON operations (tenant, fingerprint, created_at)`},
	// A subscription's body format (docs/WEBHOOKS.md: standard, slack, teams, pagerduty) and, for
	// PagerDuty, the secret reference of its routing key. Columns with a constant default: no
	// rewrite, and the previous release ignores them (its publisher sends the standard body).
	{24, "webhook formats", `
ALTER TABLE webhook_subscriptions ADD COLUMN format TEXT NOT NULL DEFAULT 'standard';
ALTER TABLE webhook_subscriptions ADD COLUMN routing_key TEXT;
`},
	// Email to reviewers (models/mail.go): the messages, once per review, recipient and event,
	// and each user's choice to mute them. A table and a column with a constant default.
	{25, "email to reviewers", mailSchema},
	// Invite links (models/invites.go): a new user sets their own first password.
	{26, "user invites", invitesSchema},
	// A PagerDuty routing key typed in the console is a value sealed under the data key, with
	// its last four characters to show (models/routing_keys.go). Nullable columns: the previous
	// release ignores them.
	{27, "sealed routing keys", `
ALTER TABLE webhook_subscriptions ADD COLUMN routing_key_sealed TEXT;
ALTER TABLE webhook_subscriptions ADD COLUMN routing_key_hint TEXT;
`},
	// Policy on arguments and budgets (models/policy.go): what a policy decided of an operation,
	// the budgets' charges, and the rows that serialise the charges of one scope value. New
	// tables: the previous release ignores them.
	{28, "policies and budgets", policySchema},
	// Budget counters (models/budget_counters.go): a budget's usage per scope value kept in a row
	// the database updates with every charge and every change of an operation's state (two
	// triggers), so a charge reads one row instead of summing its window. A table and triggers:
	// the previous release ignores the table, and its state changes keep the counters exact.
	// budget_locks, which step 28's charges locked, is no longer written; it goes one release
	// later (contract).
	{29, "budget counters", budgetCountersSchema},
}

// searchSchema is migration step 12: the indexes of the console's search that a new operation
// does not maintain, and saved views (docs/PERFORMANCE.md, "Console search on 1,000,000
// operations", measures the search with and without them).
//
//	operations_downstream_ref (downstream_ref) partial   search by downstream reference
//	operations_error_class (error_class, id) partial      search by error class, newest first
//
// Both columns are NULL when an operation is recorded, so neither index costs the insert; they
// are written when an attempt ends with a reference or an error class. The key substring and a
// param's value are found by the newest-first walk with no index of their own: a trigram or
// JSON index would cost every insert (measured in the same section).
const searchSchema = `
CREATE INDEX operations_downstream_ref ON operations (downstream_ref) WHERE downstream_ref IS NOT NULL;
CREATE INDEX operations_error_class ON operations (error_class, id) WHERE error_class IS NOT NULL;
CREATE TABLE saved_views (
	id         TEXT PRIMARY KEY,
	owner      TEXT NOT NULL REFERENCES users(id),
	name       TEXT NOT NULL,
	page       TEXT NOT NULL,
	query      TEXT NOT NULL,
	created_at {{ts}} NOT NULL,
	UNIQUE (owner, page, name)
);
`

// hotPathSchema is migration step 10: what a new operation writes, and no more (docs/PERFORMANCE.md).
//
// watched is set by a waiter whose operation another process may settle (Ledger.Watch): only
// then does a change of the operation notify the other replicas (Ledger.flush).
//
// Every index on operations, by the query it serves; an index whose rows a new operation never
// has is partial on what its queries already require, so a new operation does not maintain it:
//
//	operations_pkey (id)                      reads by id (Get), every compare-and-set
//	operations_tenant_op_key_key (tenant, op_key), unique   the claim (Submit) and the key look-up (GetByKey)
//	operations_tenant_list (tenant, id)       the API's and console's lists, newest first (List, Search)
//	operations_created (tenant, created_at)   lists by creation time, the dashboard's overdue list, approval expiry
//	operations_lease (state, lease_expires_at)  the lease reaper; counts and oldest by state (gauges, dashboard)
//	operations_retention (tool, completed_at) partial   retention (Purge)
//	operations_sealed (id) partial            whether any params are sealed (data-key rotation)
//	operations_due (state, next_attempt_at) WHERE next_attempt_at IS NOT NULL   claiming due work (ClaimDue); was full
//	operations_probe (state, next_probe_at) WHERE next_probe_at IS NOT NULL     due reconcile probes; was full
//	operations_workflow (tenant, workflow_run_id) WHERE workflow_run_id IS NOT NULL   a workflow's operations; was full
//
// Each partial index's queries compare its column with an operator that is false on NULL, so
// PostgreSQL proves the predicate from the query whatever the parameters (generic plans too).
const hotPathSchema = `
ALTER TABLE operations ADD COLUMN watched BOOLEAN NOT NULL DEFAULT FALSE;
DROP INDEX operations_due;
CREATE INDEX operations_due ON operations (state, next_attempt_at) WHERE next_attempt_at IS NOT NULL;
DROP INDEX operations_probe;
CREATE INDEX operations_probe ON operations (state, next_probe_at) WHERE next_probe_at IS NOT NULL;
DROP INDEX operations_workflow;
CREATE INDEX operations_workflow ON operations (tenant, workflow_run_id) WHERE workflow_run_id IS NOT NULL;
`

// SchemaVersion is the version this build expects.
func SchemaVersion() int { return migrations[len(migrations)-1].version }

func dialectSQL(d Dialect, sql string) string {
	ts, serial := "TIMESTAMP", "INTEGER PRIMARY KEY AUTOINCREMENT"
	if d == Postgres {
		ts, serial = "TIMESTAMPTZ", "BIGSERIAL PRIMARY KEY"
	}
	// {{new_ledger_key}} is a fresh key each time a step naming it runs; only one does, once.
	return strings.NewReplacer("{{ts}}", ts, "{{serial}}", serial, "{{new_ledger_key}}", newLedgerKey(),
		"{{concurrently}}", "").Replace(sql)
}

// Migrate applies every pending step: the ordinary ones in one transaction per run of them, an
// index step alone (built CONCURRENTLY on PostgreSQL). Replicas that start at once queue on an
// advisory lock held by a transaction of its own (PostgreSQL: see migrateLock) or on the database
// write lock (SQLite); the later ones find nothing left to do.
func Migrate(ctx context.Context, db *gorm.DB, d Dialect) error {
	db = db.WithContext(ctx)
	if d == Postgres {
		unlock, err := migrateLock(ctx, db)
		if err != nil {
			return fmt.Errorf("ledger: migrate: %w", err)
		}
		defer unlock()
	}
	for {
		next, err := migrateBatch(db, d)
		if err == nil && next != nil {
			err = buildIndex(db, *next)
		}
		if err != nil {
			return fmt.Errorf("ledger: migrate: %w", err)
		}
		if next == nil {
			return nil
		}
	}
}

// migrateBatch applies, in one transaction, the pending steps up to the first index step built
// concurrently, and returns that step (nil when none is pending).
func migrateBatch(conn *gorm.DB, d Dialect) (next *migration, err error) {
	err = conn.Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec(dialectSQL(d, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT NOT NULL,
			applied_at {{ts}} NOT NULL)`)).Error; err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var current int
		if err := tx.Raw("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&current).Error; err != nil {
			return fmt.Errorf("read version: %w", err)
		}
		if current > SchemaVersion() {
			// A newer release migrated the ledger: go on while it still serves this one.
			return servesThisBuild(tx, current)
		}
		for _, m := range migrations {
			if m.version <= current {
				continue
			}
			// A new ledger's tables are empty and nobody writes yet: its indexes are built in the
			// transaction. (A concurrent build waits for every older transaction in the database,
			// which a new ledger has no reason to.)
			if _, ok := indexSteps[m.version]; ok && d == Postgres && current > 0 {
				next = &m
				return nil
			}
			stmts := splitStatements(dialectSQL(d, m.sql))
			if own, ok := dialectSteps[m.version]; ok {
				stmts = append(stmts, own(d)...)
			}
			for _, stmt := range stmts {
				if err := tx.Exec(stmt).Error; err != nil {
					return fmt.Errorf("step %d (%s): %w", m.version, m.name, err)
				}
			}
			if err := record(tx, m); err != nil {
				return err
			}
		}
		return nil
	})
	return next, err
}

// buildIndex runs index step m on PostgreSQL, outside any transaction: CREATE INDEX
// CONCURRENTLY, after dropping what a build that was cut off left (an index marked invalid,
// which IF NOT EXISTS would otherwise take for done), then records the step.
func buildIndex(conn *gorm.DB, m migration) error {
	var invalid bool
	if err := conn.Raw(`SELECT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relname = ? AND c.relnamespace = current_schema()::regnamespace AND NOT i.indisvalid)`, indexSteps[m.version]).Scan(&invalid).Error; err != nil {
		return fmt.Errorf("step %d (%s): %w", m.version, m.name, err)
	}
	if invalid {
		if err := conn.Exec("DROP INDEX CONCURRENTLY IF EXISTS " + indexSteps[m.version]).Error; err != nil {
			return fmt.Errorf("step %d (%s): drop the index a cut-off build left: %w", m.version, m.name, err)
		}
	}
	// A concurrent build on a large ledger takes as long as it takes, and waits for every older
	// transaction: on a connection of its own, without the sessions' statement and lock
	// timeouts (pgsession.go), which are put back before the connection returns to the pool.
	err := conn.Connection(func(c *gorm.DB) error {
		if sessionlessPool(c) {
			// Through a transaction pooler a SET would stay on whichever server session it
			// lent, and the sessions carry none of ours (pgsession.go).
			return c.Exec(strings.ReplaceAll(m.sql, "{{concurrently}}", "CONCURRENTLY")).Error
		}
		for _, set := range []string{"SET statement_timeout = 0", "SET lock_timeout = 0"} {
			if err := c.Exec(set).Error; err != nil {
				return err
			}
		}
		built := c.Exec(strings.ReplaceAll(m.sql, "{{concurrently}}", "CONCURRENTLY")).Error
		for _, reset := range []string{"RESET statement_timeout", "RESET lock_timeout"} {
			if err := c.Exec(reset).Error; err != nil && built == nil {
				return err
			}
		}
		return built
	})
	if err != nil {
		return fmt.Errorf("step %d (%s): %w", m.version, m.name, err)
	}
	return record(conn, m)
}

// record writes step m into schema_migrations.
func record(db *gorm.DB, m migration) error {
	var err error
	if m.version >= servesFromStep {
		err = db.Exec("INSERT INTO schema_migrations (version, name, applied_at, serves_from) VALUES (?, ?, ?, ?)",
			m.version, m.name, time.Now().UTC(), m.servesFrom()).Error
	} else {
		err = db.Exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
			m.version, m.name, time.Now().UTC()).Error
	}
	if err != nil {
		return fmt.Errorf("record step %d: %w", m.version, err)
	}
	return nil
}

// servesFromStep is the step that made schema_migrations record what each step serves.
const servesFromStep = 22

// ErrLedgerTooNew says a ledger was migrated by a release this build cannot run beside.
type ErrLedgerTooNew struct {
	Ledger, ServesFrom, Build int
}

func (e *ErrLedgerTooNew) Error() string {
	return fmt.Sprintf("the ledger is at schema %d, which serves releases of schema %d and later; this build knows schema %d: run a release whose `idemgate version` says schema %d or later",
		e.Ledger, e.ServesFrom, e.Build, e.ServesFrom)
}

// servesThisBuild reads what the ledger's newest step serves (a step before servesFromStep
// serves only its own schema) and says whether this build may run on it.
func servesThisBuild(db *gorm.DB, current int) error {
	from := current
	var recorded *int
	if current >= servesFromStep {
		if err := db.Raw("SELECT serves_from FROM schema_migrations WHERE version = ?", current).Scan(&recorded).Error; err != nil {
			return unavailable("read what the ledger's schema serves", err)
		}
		if recorded != nil {
			from = *recorded
		}
	}
	if SchemaVersion() < from {
		return &ErrLedgerTooNew{Ledger: current, ServesFrom: from, Build: SchemaVersion()}
	}
	return nil
}

// CurrentVersion returns the schema version recorded in the database (0 when none).
func CurrentVersion(ctx context.Context, db *gorm.DB) (int, error) {
	var v int
	err := db.WithContext(ctx).Raw("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&v).Error
	if err != nil {
		return 0, unavailable("read schema version", err)
	}
	return v, nil
}

func splitStatements(sql string) []string {
	var out []string
	for _, s := range strings.Split(sql, ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
