-- The SQL of one replay through the API (Authenticate, then the key look-up that answers it).
-- Run with: pgbench -n -c 16 -T 10 -f replay.sql  (after setup.sql)
SELECT api_keys.*, principals.name AS principal_name FROM api_keys JOIN principals ON principals.id = api_keys.principal_id WHERE api_keys.hash = 'benchhash' AND api_keys.revoked_at IS NULL LIMIT 1;
SELECT * FROM operations WHERE tenant = 'bench' AND op_key = 'replay' LIMIT 1;
