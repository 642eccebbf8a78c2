#!/usr/bin/env bash
# Builds the container image and runs it in a real runtime (Debian's podman with runc, as root),
# proving what docs/OPERATIONS.md promises: /readyz answers 200, the demo's refund is 201 and its
# replay 200 (Idempotent-Replayed, one refund in the sandbox), and SIGTERM stops the container
# cleanly (exit code 0) well within its stop timeout. Run by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
name="idemgate-ci-$$"
pod() { podman --runtime runc --cgroup-manager cgroupfs "$@"; }
cleanup() { pod rm -f "$name" >/dev/null 2>&1 || true; rm -rf "$tmp"; }
trap cleanup EXIT

go run ./deploy/image -out "$tmp" -version v0.0.0-ci -revision ci
pod load -q -i "$tmp/idemgate.tar"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Explicit limits: podman's defaults ask for more than this machine's hard limits allow.
pod run -d --name "$name" --network host --ulimit nofile=16384:16384 --ulimit nproc=4096:4096 \
  localhost/idemgate:v0.0.0-ci serve --demo --addr "127.0.0.1:$port" >/dev/null
url="http://127.0.0.1:$port"
for _ in $(seq 1 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/readyz")" = 200 ] && break
  sleep 0.2
done
status=$(curl -s -o /dev/null -w '%{http_code}' "$url/readyz")
[ "$status" = 200 ] || { pod logs "$name"; echo "readyz answered $status"; exit 1; }
key=$(pod logs "$name" 2>/dev/null | sed -n 's/^ *API key: *\(idg_[A-Za-z0-9_-]*\).*/\1/p' | head -n1)
[ -n "$key" ] || { pod logs "$name"; echo "no demo API key printed"; exit 1; }
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
start=$(date +%s%N)
pod stop -t 30 "$name" >/dev/null
took=$(( ($(date +%s%N) - start) / 1000000 ))
code=$(pod inspect "$name" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] || { pod logs "$name" | tail -n 20; echo "exit code $code after SIGTERM, want 0"; exit 1; }
[ "$took" -lt 25000 ] || { echo "stopping took ${took} ms: SIGTERM was not honoured"; exit 1; }
echo "image ran: readyz 200, refund 201, replay 200 (one refund), SIGTERM stopped it in ${took} ms with exit code 0"
