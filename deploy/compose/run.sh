#!/usr/bin/env bash
# Runs idemgate's services from deploy/compose.yaml in a real Docker, against the CI's
# PostgreSQL: starts Debian's Docker daemon itself (no iptables, no bridge; its data, sockets and
# pidfile in a temporary directory), loads the image, makes a database for the run, and brings
# up migrate, serve and worker with deploy/compose/ci.yaml (host network, the demo on a free
# port). Proves: migrate exits 0 before serve and worker start, /readyz 200, the demo's refund
# 201 and its replay 200 (Idempotent-Replayed, one refund in the sandbox), /metrics, the worker
# running, all three hardened (non-root, read-only root, no capabilities), and serve and worker
# stopping on SIGTERM with exit code 0. Then everything comes down: the containers, the daemon,
# the database. Run by .ci/run, as root; needs dockerd (docker.io), docker-compose (1.29.2), psql
# and Go.
set -euo pipefail
cd "$(dirname "$0")/../.."
admin=${IDEMGATE_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
tmp=$(mktemp -d)
project="idemgate-ci-$$"
db="idemgate_compose_ci_$$"
export DOCKER_HOST="unix://$tmp/docker.sock"
dc() { docker-compose -p "$project" -f "$tmp/run.yaml" "$@"; }
dockerd_pid=""
cleanup() {
  set +e
  [ -f "$tmp/run.yaml" ] && dc down -t 5 >/dev/null 2>&1
  if [ -n "$dockerd_pid" ]; then
    kill "$dockerd_pid" 2>/dev/null
    wait "$dockerd_pid" 2>/dev/null
  fi
  # What the daemon leaves mounted under its directories (its network namespace).
  awk -v dir="$tmp/" 'index($2, dir) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount 2>/dev/null
  psql -q "$admin" -c "DROP DATABASE IF EXISTS $db" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

# The daemon, started here and stopped by cleanup. No iptables rules and no docker0 bridge: the
# services use the host's network, and nothing on the machine changes.
dockerd --iptables=false --ip-masq=false --bridge=none --data-root "$tmp/data" --exec-root "$tmp/run" \
  --pidfile "$tmp/docker.pid" -H "$DOCKER_HOST" >"$tmp/dockerd.log" 2>&1 &
dockerd_pid=$!
for _ in $(seq 1 100); do docker version >/dev/null 2>&1 && break; sleep 0.2; done
docker version --format 'Docker daemon {{.Server.Version}}' || { tail -n 20 "$tmp/dockerd.log"; exit 1; }

go run ./deploy/image -out "$tmp/image" -version v0.0.0-ci -revision ci >/dev/null
docker load -q -i "$tmp/image/idemgate.tar"

psql -q "$admin" -c "CREATE DATABASE $db"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port)
export COMPOSE_CI_PORT=$port COMPOSE_CI_METRICS_PORT=$(free_port)
export COMPOSE_CI_DATABASE_URL=$(python3 -c 'import sys, urllib.parse as u; p=u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/"+sys.argv[2])))' "$admin" "$db")
export IMAGE_TAG=v0.0.0-ci POSTGRES_PASSWORD=unused-in-ci

# The compose file as users run it, with CI's override; then what an override cannot remove.
cp deploy/compose.yaml "$tmp/compose.yaml"
cp deploy/compose/ci.yaml "$tmp/ci.yaml"
sed -e 's/^IDEMGATE_SESSION_KEY=$/IDEMGATE_SESSION_KEY=ci-session-key-ci-session-key-ci-1234/' \
    -e 's/^IDEMGATE_DATA_KEY=$/IDEMGATE_DATA_KEY=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=/' deploy/idemgate.env.example >"$tmp/idemgate.env"
docker-compose -f "$tmp/compose.yaml" -f "$tmp/ci.yaml" config >"$tmp/merged.yaml"
python3 - "$tmp/merged.yaml" "$tmp/run.yaml" <<'EOF'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
del c["services"]["postgres"]
c.pop("volumes", None)
for name, s in c["services"].items():
    deps = s.get("depends_on", {})
    deps.pop("postgres", None)
    if not deps:
        s.pop("depends_on", None)
    s.pop("ports", None)  # the host's network: serve listens where ci.yaml says
    assert s["network_mode"] == "host", name
yaml.safe_dump(c, open(sys.argv[2], "w"), sort_keys=False)
EOF
services=$(dc config --services | sort | tr '\n' ' ')
[ "$services" = "migrate serve worker " ] || { echo "services to run: $services"; exit 1; }

# serve and worker wait for migrate to complete (depends_on: service_completed_successfully).
dc up -d serve worker
container() { dc ps -a -q "$1"; }
state() { docker inspect "$(container "$1")" --format "$2"; }
[ "$(state migrate '{{.State.Status}} {{.State.ExitCode}}')" = "exited 0" ] ||
  { dc logs --no-color migrate; echo "migrate did not exit 0"; exit 1; }
migrated=$(dc logs --no-color migrate)
grep -q 'schema at version' <<<"$migrated" || { echo "$migrated"; echo "migrate did not say the schema"; exit 1; }

url="http://127.0.0.1:$port"
for _ in $(seq 1 150); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/readyz")" = 200 ] && break
  sleep 0.2
done
status=$(curl -s -o /dev/null -w '%{http_code}' "$url/readyz")
[ "$status" = 200 ] || { dc logs --no-color; echo "readyz answered $status"; exit 1; }
key=$(dc logs --no-color serve | sed -n 's/.*API key: *\(idg_[A-Za-z0-9_-]*\).*/\1/p' | head -n1)
[ -n "$key" ] || { dc logs --no-color serve; echo "no demo API key printed"; exit 1; }
refund() {
  curl -s -o "$tmp/answer" -D "$tmp/headers" -w '%{http_code}' "$url/v1/operations" \
    -H "Authorization: Bearer $key" -H 'Idempotency-Key: order-1042:refund' -H 'Content-Type: application/json' \
    -d '{"tool":"refunds.issue","params":{"order_id":"1042","amount_cents":1999,"currency":"EUR"}}'
}
first=$(refund)
[ "$first" = 201 ] || { cat "$tmp/answer"; echo "the refund answered $first, want 201"; exit 1; }
second=$(refund)
[ "$second" = 200 ] && grep -qi '^Idempotent-Replayed: true' "$tmp/headers" ||
  { cat "$tmp/headers" "$tmp/answer"; echo "the replay answered $second, want 200 with Idempotent-Replayed"; exit 1; }
refunds=$(curl -s "$url/sandbox/_stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["committed"].get("refunds", 0))')
[ "$refunds" = 1 ] || { echo "the sandbox made $refunds refunds, want 1"; exit 1; }
metrics=$(curl -sf "http://127.0.0.1:$COMPOSE_CI_METRICS_PORT/metrics") && grep -q '^# HELP' <<<"$metrics" ||
  { echo "serve's /metrics did not answer"; exit 1; }
[ "$(state worker '{{.State.Running}}')" = true ] || { dc logs --no-color worker; echo "the worker is not running"; exit 1; }
# They ran hardened, as the Helm chart's pods do (x-hardened in compose.yaml).
for s in migrate serve worker; do
  got=$(state "$s" '{{.Config.User}} {{.HostConfig.ReadonlyRootfs}} {{.HostConfig.CapDrop}} {{.HostConfig.SecurityOpt}} {{.HostConfig.Tmpfs}}')
  [ "$got" = "65532:65532 true [ALL] [no-new-privileges:true] map[/tmp:]" ] || { echo "$s ran as: $got"; exit 1; }
done

# SIGTERM (docker-compose stop) stops both cleanly.
dc stop -t 30 serve worker >/dev/null 2>&1
for s in serve worker; do
  code=$(state "$s" '{{.State.ExitCode}}')
  [ "$code" = 0 ] || { dc logs --no-color "$s" | tail -n 20; echo "$s: exit code $code after SIGTERM, want 0"; exit 1; }
done
dc down -t 5 >/dev/null 2>&1
echo "compose ran: migrate exited 0, readyz 200, refund 201, replay 200 (one refund), worker running, all hardened, serve and worker stopped with exit code 0"
