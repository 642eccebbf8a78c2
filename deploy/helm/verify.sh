#!/usr/bin/env bash
# Checks the Helm chart (deploy/helm/idemgate) offline: helm lint --strict and helm template for
# the default values and for values-production.yaml (every option on), then every rendered
# manifest decoded strictly with the Kubernetes API's Go types (deploy/helm/check, a Go module
# of its own: unknown fields, wrong types and unknown kinds fail; pods must be hardened; what
# refers to something must find it), and how many objects of each kind each values file
# renders; last, the production values' pods run in podman against the CI's PostgreSQL. Run by
# .ci/run; needs Go (and the Go module proxy the first time, to build helm and the checker),
# podman with runc, psql and python3.
set -euo pipefail
cd "$(dirname "$0")"

HELM_VERSION=v4.3.2   # pinned
# helm is not in Debian: built from source once (4 to 7 minutes on 2 cores), then kept in a cache
# that later runs find.
cache=${XDG_CACHE_HOME:-$HOME/.cache}/idemgate-ci/helm-$HELM_VERSION
helm=$cache/helm
# The module version Go recorded in the binary (go version -m), and the version helm prints
# (set with the linker, as helm's own Makefile does; go install alone would print "v4.3").
built() { go version -m "$helm" 2>/dev/null | awk '$1=="mod" && $2=="helm.sh/helm/v4" {print $3}'; }
if [ ! -x "$helm" ] || [ "$(built)" != "$HELM_VERSION" ] ||
  [ "$("$helm" version --template '{{.Version}}')" != "$HELM_VERSION" ]; then
  echo "building helm $HELM_VERSION into $cache"
  GOBIN=$cache go install -trimpath \
    -ldflags "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION -X helm.sh/helm/v4/internal/version.gitTreeState=clean" \
    "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
fi
version=$("$helm" version --template '{{.Version}}')
[ "$version" = "$HELM_VERSION" ] && [ "$(built)" = "$HELM_VERSION" ] ||
  { echo "helm says $version, built from helm.sh/helm/v4 $(built); want $HELM_VERSION"; exit 1; }
echo "helm $version"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# helm keeps its settings and caches under these; none of the user's, none left behind.
export HELM_CACHE_HOME=$tmp/helm/cache HELM_CONFIG_HOME=$tmp/helm/config HELM_DATA_HOME=$tmp/helm/data

# The checker proves it can fail (a manifest with an unknown field, one with a wrong type, …),
# then is built once.
(cd check && go vet . && go test -count=1 . && go build -o "$tmp/check" .)

# The checker's module stays out of idemgate's: the root's ./... does not reach it, and the
# root go.mod names no Kubernetes library.
root_pkgs=$(cd ../.. && go list ./...)
if grep -F /deploy/helm/ <<<"$root_pkgs" || grep -q 'k8s\.io' ../../go.mod; then
  echo "deploy/helm/check leaked into idemgate's own module"; exit 1
fi

chart=idemgate
check() { # name want [helm template flags…]
  local name=$1 want=$2; shift 2
  "$helm" lint --strict "$chart" "$@"
  "$helm" template idemgate "$chart" --namespace idemgate "$@" >"$tmp/$name.yaml"
  "$tmp/check" -want "$want" "$tmp/$name.yaml"
  echo "-- $name: $(grep -c '^kind:' "$tmp/$name.yaml") manifests valid"
}
check default "Deployment=1,Job=1,Service=1"
check production "Deployment=2,Job=1,Service=3,ServiceMonitor=1,PodDisruptionBudget=2,NetworkPolicy=1" -f "$chart/values-production.yaml"

# What the production values must have rendered, beyond the kinds.
prod=$tmp/production.yaml
expect() { grep -qF -- "$1" "$prod" || { echo "values-production.yaml rendered no $1"; exit 1; }; }
expect 'value: "$(HELM_IDEMGATE_DATABASE_URL)&default_query_exec_mode=exec"'
expect '- name: IDEMGATE_DATABASE_LISTEN_URL'
expect '- name: IDEMGATE_DATA_KEYS_OLD'
expect 'helm.sh/hook: pre-install,pre-upgrade'
expect 'path: /healthz'
expect 'path: /readyz'
expect '- 0.0.0.0:9090'
expect '- name: IDEMGATE_TRUST_PROXY'
expect 'kubernetes.io/metadata.name: ingress-nginx'
# /metrics is never on the API's Service (the one an ingress points at): its only ports are http.
python3 - "$prod" <<'PY' || exit 1
import sys
docs = open(sys.argv[1]).read().split('\n---')
api = [d for d in docs if '\nkind: Service\n' in d and '\n  name: idemgate\n' in d]
assert len(api) == 1, 'no API Service rendered'
assert 'name: metrics' not in api[0], "the API's Service carries /metrics"
PY
[ "$(grep -c '^  replicas: 2$' "$prod")" = 1 ] || { echo "values-production.yaml: serve does not run two replicas"; exit 1; }

# A URL without a query gets the mode after ?; a misspelt value, or a Secret without a name,
# is refused before anything renders (values.schema.json and the templates' required).
"$helm" template idemgate "$chart" --set pgbouncer.enabled=true --set pgbouncer.databaseUrlHasQuery=false >"$tmp/noquery.yaml"
grep -qF '$(HELM_IDEMGATE_DATABASE_URL)?default_query_exec_mode=exec' "$tmp/noquery.yaml" ||
  { echo "a URL without a query did not get ?default_query_exec_mode=exec"; exit 1; }
refused() { # what helm must say, then the flags it must refuse
  local want=$1; shift
  if "$helm" template idemgate "$chart" "$@" >/dev/null 2>"$tmp/err"; then
    echo "helm template accepted $*"; exit 1
  fi
  grep -qF -- "$want" "$tmp/err" || { cat "$tmp/err"; echo "refused $*, but not saying: $want"; exit 1; }
  echo "-- refused $*: $want"
}
refused "additional properties 'replicas' not allowed" --set serve.replicas=2
refused "value must be one of '', 'exec', 'simple_protocol'" --set pgbouncer.queryExecMode=describe_exec
refused "secrets.databaseUrl.name is required" --set secrets.databaseUrl.name=
refused "got string, want integer" --set-string serve.replicaCount=two
refused "/metrics/serviceMonitor/interval" --set metrics.serviceMonitor.interval=30sec
refused "trustProxy needs networkPolicy.enabled" --set trustProxy=10.0.0.0/8

# The production values' pods, run: the migration Job, then serve and worker, each container in
# podman as the rendered spec says (args, env from the Secrets below, user 65532, read-only root
# with /tmp as tmpfs, no capabilities, no privilege escalation, a network namespace of its own
# that reaches the CI's PostgreSQL at 10.0.2.2, slirp4netns's name for the host's loopback). The
# Job must exit 0, every probe answer 200 on its named port, /metrics answer on the metrics
# ports, and SIGTERM stop serve and worker with exit code 0 (deploy/helm/check -run).
pod="podman --runtime runc --cgroup-manager cgroupfs"
admin=${IDEMGATE_TEST_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
db="idemgate_helm_ci_$$"
tag=v0.0.0-helm-ci
trap 'psql -q "$admin" -c "DROP DATABASE IF EXISTS $db" 2>/dev/null; $pod rmi -f "localhost/idemgate:$tag" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
(cd ../.. && go run ./deploy/image -out "$tmp/image" -version "$tag" -revision ci >/dev/null)
$pod load -q -i "$tmp/image/idemgate.tar" >/dev/null
psql -q "$admin" -c "CREATE DATABASE $db"
url=$(python3 -c 'import sys, urllib.parse as u; p=u.urlsplit(sys.argv[1]); host=p.netloc.replace("127.0.0.1", "10.0.2.2").replace("localhost", "10.0.2.2"); print(u.urlunsplit(p._replace(netloc=host, path="/"+sys.argv[2])))' "$admin" "$db")
key() { python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())'; }
sed 's|{{SANDBOX}}|http://sandbox.invalid|g' ../../jobs/catalog/demo.yaml >"$tmp/tools.yaml"
"$helm" template idemgate "$chart" -f "$chart/values-production.yaml" \
  --set image.repository=localhost/idemgate --set image.tag="$tag" --set image.pullPolicy=Never >"$tmp/run.yaml"
"$tmp/check" -run -podman "$pod" \
  -secret "idemgate-database/url=$url" -secret "idemgate-database/listen-url=$url" \
  -secret "idemgate-keys/session-key=$(key)" -secret "idemgate-keys/data-key=$(key)" \
  -secret "idemgate-keys/data-keys-old=$(key)" -configmap "idemgate-tools/tools.yaml=$tmp/tools.yaml" "$tmp/run.yaml" >"$tmp/run.log" ||
  { cat "$tmp/run.log"; exit 1; }
grep -v '^ok ' "$tmp/run.log"

echo "helm chart verified: lint, template and strict schema checks for the default and production values; the production pods ran"
