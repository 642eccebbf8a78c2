-- Our own SQL's floor (not the database floor's replay.sql): the SQL of one replay
-- through the API, the key look-up that answers it. (The caller's API key is remembered by the
-- gateway for a second, so a busy agent's replays read nothing else.)
-- Run with: pgbench -n -M prepared -c 16 -T 10 -f replay.sql  (after setup.sql)
SELECT * FROM operations WHERE tenant = 'bench' AND op_key = 'replay';
