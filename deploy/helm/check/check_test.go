package main

import (
	"strings"
	"testing"
)

// good is a Deployment the checker passes: hardened as the chart's pods are.
const good = `# Source: idemgate/templates/deployment-serve.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: idemgate
  labels:
    app.kubernetes.io/name: idemgate
spec:
  replicas: 2
  selector:
    matchLabels:
      app.kubernetes.io/name: idemgate
  template:
    metadata:
      labels:
        app.kubernetes.io/name: idemgate
    spec:
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: serve
          image: idemgate:devel
          args: ["serve"]
          ports:
            - name: http
              containerPort: 8080
            - name: metrics
              containerPort: 9090
          securityContext:
            readOnlyRootFilesystem: true
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
          volumeMounts:
            - name: tmp
              mountPath: /tmp
      volumes:
        - name: tmp
          emptyDir: {}
---
# Source: idemgate/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: idemgate
  labels:
    app.kubernetes.io/name: idemgate
spec:
  selector:
    app.kubernetes.io/name: idemgate
  ports:
    - name: http
      port: 8080
      targetPort: http
    - name: metrics
      port: 9090
      targetPort: 9090
---
# Source: idemgate/templates/pdb.yaml
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: idemgate
spec:
  maxUnavailable: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: idemgate
---
# Source: idemgate/templates/servicemonitor.yaml
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata:
  name: idemgate
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: idemgate
  endpoints:
    - port: metrics
      interval: 30s
`

func check(t *testing.T, manifests string) []string {
	t.Helper()
	objs, errs := Decode(strings.NewReader(manifests))
	errs = append(errs, Rules(objs)...)
	errs = append(errs, Wiring(objs)...)
	var msgs []string
	for _, err := range errs {
		msgs = append(msgs, err.Error())
	}
	return msgs
}

func TestGoodManifestsPass(t *testing.T) {
	if errs := check(t, good); len(errs) > 0 {
		t.Fatalf("good manifests failed:\n%s", strings.Join(errs, "\n"))
	}
	objs, _ := Decode(strings.NewReader(good))
	if len(objs) != 4 || objs[0].Kind != "Deployment" || objs[3].Kind != "ServiceMonitor" {
		t.Fatalf("decoded %v", objs)
	}
	if errs := Counts(objs, "Deployment=1,Service=1,PodDisruptionBudget=1,ServiceMonitor=1"); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// TestTheCheckerFails: each change to the good manifests is one the Kubernetes API (or the
// Prometheus Operator's CRD) would refuse, or one the chart promises never to render, and the
// checker must say so, naming the document.
func TestTheCheckerFails(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"an unknown field", "  replicas: 2\n", "  replicas: 2\n  replicaz: 3\n", `unknown field "spec.replicaz"`},
		{"a misspelt nested field", "          containerPort: 8080", "          containerport: 8080", `unknown field "spec.template.spec.containers[0].ports[0].containerport"`},
		{"a wrong type", "  replicas: 2\n", "  replicas: two\n", "replicas"},
		{"a string for a number", "containerPort: 8080", `containerPort: "8080"`, "containerPort"},
		{"a list for a map", "            capabilities:\n              drop: [\"ALL\"]", "            capabilities: [\"ALL\"]", "capabilities"},
		{"a key given twice", "  replicas: 2\n", "  replicas: 2\n  replicas: 3\n", `"replicas" already set`},
		{"an unknown field of the ServiceMonitor", "      interval: 30s", "      intervall: 30s", `unknown field "spec.endpoints[0].intervall"`},
		{"a wrong type in the ServiceMonitor", "      interval: 30s", "      interval: [30s]", "interval"},
		{"a duration Prometheus does not take", "      interval: 30s", "      interval: 30 seconds", "not a Prometheus duration"},
		{"a Service's target port the pods lack", "      targetPort: http", "      targetPort: web", "target port web is not a port"},
		{"a Service's target port number the pods lack", "      targetPort: 9090", "      targetPort: 9091", "target port 9091 is not a port"},
		{"a Service selecting no pods", "  selector:\n    app.kubernetes.io/name: idemgate\n  ports:", "  selector:\n    app.kubernetes.io/name: idemgat\n  ports:", "Service \"idemgate\": selects no Deployment"},
		{"a ServiceMonitor's port the Service lacks", "    - port: metrics", "    - port: metric", `endpoint port "metric" is not a port`},
		{"a PodDisruptionBudget selecting no pods", "  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: idemgate", "  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: other", "PodDisruptionBudget \"idemgate\": selects no"},
		{"an unknown kind", "kind: ServiceMonitor", "kind: ServiceMonitr", "no kind \"ServiceMonitr\""},
		{"an unknown API version", "apiVersion: apps/v1", "apiVersion: apps/v2", "apps/v2"},
		{"a bad name", "  name: idemgate\n  labels:", "  name: Idemgate_1\n  labels:", "name:"},
		{"a bad label value", "    app.kubernetes.io/name: idemgate\nspec:\n  replicas", "    app.kubernetes.io/name: idem gate\nspec:\n  replicas", "label app.kubernetes.io/name"},
		{"root", "runAsNonRoot: true", "runAsNonRoot: false", "runAsNonRoot is not true"},
		{"a writable root filesystem", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"},
		{"privilege escalation", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", "allowPrivilegeEscalation"},
		{"capabilities kept", `drop: ["ALL"]`, `drop: ["NET_RAW"]`, "capabilities"},
		{"no seccomp profile", "type: RuntimeDefault", "type: Unconfined", "seccompProfile"},
		{"a token mounted", "automountServiceAccountToken: false", "automountServiceAccountToken: true", "service account token"},
		{"no /tmp", "mountPath: /tmp", "mountPath: /scratch", "/tmp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(good, tc.old) {
				t.Fatalf("the good manifests have no %q", tc.old)
			}
			errs := check(t, strings.Replace(good, tc.old, tc.new, 1))
			if len(errs) == 0 {
				t.Fatalf("passed with %s", tc.name)
			}
			all := strings.Join(errs, "\n")
			if !strings.Contains(all, tc.want) {
				t.Errorf("errors do not mention %q:\n%s", tc.want, all)
			}
			if !strings.Contains(all, "idemgate/templates/") {
				t.Errorf("errors do not name the template:\n%s", all)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	objs, _ := Decode(strings.NewReader(good))
	if errs := Counts(objs, "Deployment=2,Service=1,PodDisruptionBudget=1,ServiceMonitor=1"); len(errs) != 1 {
		t.Errorf("a missing Deployment: %v", errs)
	}
	if errs := Counts(objs, "Deployment=1,Service=1,PodDisruptionBudget=1"); len(errs) != 1 || !strings.Contains(errs[0].Error(), "ServiceMonitor rendered, want none") {
		t.Errorf("an unexpected ServiceMonitor: %v", errs)
	}
}
