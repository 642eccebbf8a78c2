-- Our own SQL's floor (not the database floor's new_op_spec.sql): the
-- statements one new operation through the API sends, read off models (the key look-up, Submit
-- with claim, FinishAttempt) and checked against what models/txcount_test.go records at the
-- driver, as pgbench would issue them. Each transaction ends with one statement that writes its
-- events, notifies the operations another replica watches (none here) and asks whether the
-- tenant has a live webhook subscription (Ledger.flush).
-- (The caller's API key is remembered by the gateway for a second, so a busy agent's requests
-- do not read it.)
-- Run with: pgbench -n -M prepared -c 16 -T 10 -f new_operation.sql  (after setup.sql). Literals
-- avoid a colon before a letter or digit, which pgbench -M prepared would take for a variable.
\set n random(1, 1000000000)
SELECT * FROM operations WHERE tenant = 'bench' AND op_key = 'k-' || :n || '-' || :client_id;
BEGIN;
INSERT INTO operations (id, tenant, op_key, tool, fingerprint, params, state, attempts, fence, principal_id, api_key_id, lease_owner, lease_expires_at, created_at, updated_at)
  VALUES ('op-' || :n || '-' || :client_id, 'bench', 'k-' || :n || '-' || :client_id, 'bench.write', 'sha256' || chr(58) || repeat('a', 64), '{"n": 1}', 'RUNNING', 1, 1, 'p', 'k', 'w', now() + interval '15 seconds', now(), now())
  ON CONFLICT DO NOTHING;
INSERT INTO attempts (id, operation_id, number, fence, worker, started_at) VALUES ('att-' || :n || '-' || :client_id, 'op-' || :n || '-' || :client_id, 1, 1, 'w', now());
WITH ev AS (INSERT INTO events (operation_id, tenant, at, type, to_state, attempt, actor, detail) VALUES
    ('op-' || :n || '-' || :client_id, 'bench', now(), 'created', 'RUNNING', NULL, 'api-bench', '{}'),
    ('op-' || :n || '-' || :client_id, 'bench', now(), 'attempt_started', NULL, 1, 'worker-w', '{}')),
  n AS (SELECT pg_notify('idemgate_operations', id) FROM operations WHERE id = ANY(('{op-' || :n || '-' || :client_id || '}')::text[]) AND watched)
SELECT (SELECT count(*) FROM n), EXISTS (SELECT 1 FROM webhook_subscriptions WHERE tenant IN ('') AND deleted_at IS NULL);
COMMIT;
BEGIN;
SELECT 1 FROM operations WHERE id = 'op-' || :n || '-' || :client_id FOR UPDATE;
UPDATE attempts SET finished_at = now(), class = 'succeeded', downstream_status = 201, latency_ms = 1 WHERE id = 'att-' || :n || '-' || :client_id AND finished_at IS NULL;
UPDATE operations SET state = 'SUCCEEDED', updated_at = now(), lease_owner = NULL, lease_expires_at = NULL, completed_at = now(), next_attempt_at = NULL, result = '{"id":"x"}', downstream_ref = 'x'
  WHERE id = 'op-' || :n || '-' || :client_id AND state = 'RUNNING' AND fence = 1;
WITH ev AS (INSERT INTO events (operation_id, tenant, at, type, from_state, to_state, attempt, actor, detail) VALUES
    ('op-' || :n || '-' || :client_id, 'bench', now(), 'attempt_finished', NULL, NULL, 1, 'worker-w', '{}'),
    ('op-' || :n || '-' || :client_id, 'bench', now(), 'state_changed', 'RUNNING', 'SUCCEEDED', 1, 'worker-w', NULL)),
  n AS (SELECT pg_notify('idemgate_operations', id) FROM operations WHERE id = ANY(('{op-' || :n || '-' || :client_id || '}')::text[]) AND watched)
SELECT (SELECT count(*) FROM n), EXISTS (SELECT 1 FROM webhook_subscriptions WHERE tenant IN ('', 'bench') AND deleted_at IS NULL);
COMMIT;
