-- Prepares a migrated idemgate schema for the pgbench scripts: a tenant, a principal, a key
-- and the operation the replay script reads. Run after `idemgate migrate` on the same database.
INSERT INTO tenants (name, created_at) VALUES ('bench', now()) ON CONFLICT DO NOTHING;
INSERT INTO principals (id, tenant, name, created_at) VALUES ('p', 'bench', 'bench', now()) ON CONFLICT DO NOTHING;
INSERT INTO api_keys (id, tenant, principal_id, prefix, hash, tools, created_at) VALUES ('k', 'bench', 'p', 'idg_bench', 'benchhash', '*', now()) ON CONFLICT DO NOTHING;
INSERT INTO operations (id, tenant, op_key, tool, fingerprint, params, result, state, attempts, fence, principal_id, api_key_id, created_at, updated_at, completed_at)
  VALUES ('op-replay', 'bench', 'replay', 'bench.write', 'sha256:x', '{"n":0}', '{"id":"x"}', 'SUCCEEDED', 1, 1, 'p', 'k', now(), now(), now()) ON CONFLICT DO NOTHING;
