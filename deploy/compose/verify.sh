#!/usr/bin/env bash
# Validates deploy/compose.yaml as Compose reads it (docker-compose config, no daemon needed),
# with an env file made from deploy/idemgate.env.example, and checks the services CI expects
# are in it. Run by .ci/run; needs Debian's docker-compose (1.29.2).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp compose.yaml "$tmp/compose.yaml"
sed -e 's/^IDEMGATE_SESSION_KEY=$/IDEMGATE_SESSION_KEY=ci-session-key-ci-session-key-ci-1234/' \
    -e 's/^IDEMGATE_DATA_KEY=$/IDEMGATE_DATA_KEY=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=/' idemgate.env.example >"$tmp/idemgate.env"
POSTGRES_PASSWORD=ci IMAGE_TAG=v0.0.0-ci docker-compose -f "$tmp/compose.yaml" config -q
services=$(POSTGRES_PASSWORD=ci docker-compose -f "$tmp/compose.yaml" config --services | sort | tr '\n' ' ')
[ "$services" = "migrate postgres serve worker " ] || { echo "services: $services"; exit 1; }
# Without the database password, Compose refuses to start anything.
if docker-compose -f "$tmp/compose.yaml" config -q 2>/dev/null; then
  echo "compose.yaml accepted no POSTGRES_PASSWORD"; exit 1
fi
echo "compose file valid: $services"
