package models

// webhooksSchema is migration step 5: webhook subscriptions, the transactional outbox, and the
// deliveries of each outbox message to each subscription, with every attempt (docs/WEBHOOKS.md).
//
// webhook_subscriptions.secret is stored in clear, unlike API keys (kept only as a hash). An
// API key is something a caller proves it holds, and a hash is enough to check that proof; a
// signing secret is something idemgate itself must use, to compute an HMAC over every payload
// it sends, and a hash of it cannot sign. So it is stored, shown once when the subscription is
// created, and never rendered again: not by lists, the console, exports or payloads.
//
// An outbox message is written only when at least one live subscription of its tenant wants
// its event type, in the same transaction as the change it reports; webhook_deliveries holds
// one row per (message, subscription), unique, so a message is never queued twice for one
// subscription. The outbox id is the webhook-id receivers see: stable across redeliveries.
const webhooksSchema = `
CREATE TABLE webhook_subscriptions (
	id            TEXT PRIMARY KEY,
	tenant        TEXT NOT NULL REFERENCES tenants(name),
	url           TEXT NOT NULL,
	events        TEXT NOT NULL,
	secret        TEXT NOT NULL,
	allow_private BOOLEAN NOT NULL DEFAULT FALSE,
	created_at    {{ts}} NOT NULL,
	deleted_at    {{ts}}
);
CREATE INDEX webhook_subscriptions_live ON webhook_subscriptions (tenant) WHERE deleted_at IS NULL;
CREATE TABLE outbox (
	id           TEXT PRIMARY KEY,
	tenant       TEXT NOT NULL,
	event_type   TEXT NOT NULL,
	operation_id TEXT NOT NULL,
	occurred_at  {{ts}} NOT NULL,
	payload      TEXT NOT NULL,
	created_at   {{ts}} NOT NULL
);
CREATE INDEX outbox_operation ON outbox (operation_id);
CREATE TABLE webhook_deliveries (
	id               TEXT PRIMARY KEY,
	outbox_id        TEXT NOT NULL REFERENCES outbox(id),
	subscription_id  TEXT NOT NULL REFERENCES webhook_subscriptions(id),
	status           TEXT NOT NULL,
	attempts         INTEGER NOT NULL DEFAULT 0,
	next_attempt_at  {{ts}} NOT NULL,
	lease_owner      TEXT,
	lease_expires_at {{ts}},
	last_error       TEXT,
	created_at       {{ts}} NOT NULL,
	delivered_at     {{ts}},
	redelivered_at   {{ts}},
	UNIQUE (outbox_id, subscription_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_status ON webhook_deliveries (status, created_at);
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries (subscription_id, status);
CREATE TABLE webhook_attempts (
	id          {{serial}},
	delivery_id TEXT NOT NULL REFERENCES webhook_deliveries(id),
	at          {{ts}} NOT NULL,
	status_code INTEGER,
	latency_ms  BIGINT NOT NULL,
	error       TEXT
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id, id);
`

// webhookRetentionSchema is migration step 6: what bounds the outbox by age (docs/STATES.md retention
// for notifications). ended_at is when a delivery was delivered or went dead (the retention
// job deletes it, with its attempts, once that is older than the webhook retention, and the
// outbox message once no delivery of it is left); a redelivery clears it. prior_attempts is
// how many claims came before the current retry window, so that a redelivery's backoff starts
// afresh while attempts, the fencing token, only grows. Deliveries that ended before this step
// take their last attempt's time (or their creation) as ended_at.
const webhookRetentionSchema = `
ALTER TABLE webhook_deliveries ADD COLUMN ended_at {{ts}};
ALTER TABLE webhook_deliveries ADD COLUMN prior_attempts INTEGER NOT NULL DEFAULT 0;
UPDATE webhook_deliveries SET ended_at = COALESCE(delivered_at,
	(SELECT MAX(a.at) FROM webhook_attempts a WHERE a.delivery_id = webhook_deliveries.id), created_at)
	WHERE status IN ('delivered', 'dead');
CREATE INDEX webhook_deliveries_ended ON webhook_deliveries (ended_at) WHERE ended_at IS NOT NULL;
`
