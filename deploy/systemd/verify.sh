#!/usr/bin/env bash
# Checks the unit files as systemd reads them (systemd-analyze verify), in a root of their own
# that holds the binary they start and the settings file they name, so that a directive systemd
# does not take, or a path it cannot run, fails. Run by .ci/run; needs systemd-analyze and Go.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin" "$root/etc/idemgate" "$root/etc/systemd/system"
CGO_ENABLED=0 go build -o "$root/usr/local/bin/idemgate" ./cmd/idemgate
touch "$root/etc/idemgate/idemgate.env"
cp deploy/systemd/*.service "$root/etc/systemd/system/"
units=()
for f in deploy/systemd/*.service; do units+=("/etc/systemd/system/$(basename "$f")"); done
systemd-analyze verify --recursive-errors=no --root="$root" "${units[@]}"
echo "systemd units verified: ${units[*]}"
