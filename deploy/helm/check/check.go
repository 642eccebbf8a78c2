// Command check validates Kubernetes manifests (the output of `helm template`) strictly against
// the Kubernetes API's own Go types, offline: each YAML document is decoded with client-go's
// scheme (every built-in kind of the API version client-go is pinned to) plus the Prometheus
// Operator's monitoring.coreos.com/v1 types, by apimachinery's strict decoder. An unknown or
// misspelt field, a duplicate field, a value of the wrong type, or a kind the scheme does not
// know fails. Then a few rules the decoder cannot see: names and labels well formed, every
// container with an image, every pod hardened the way the chart promises (non-root, read-only
// root filesystem with /tmp on an emptyDir, no privilege escalation, no capabilities, the
// RuntimeDefault seccomp profile, no service account token), and the wiring: Services,
// PodDisruptionBudgets and the ServiceMonitor select something, on ports it has.
//
//	helm template deploy/helm/idemgate | go run . [-want Deployment=2,Job=1] [FILE...]
//
// With -run it then starts the rendered pods in podman (RunPods, pods.go).
//
// It is its own Go module so that idemgate's go.mod does not carry the Kubernetes libraries.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Object is one manifest that decoded.
type Object struct {
	Source string // helm template's "# Source:" comment, or the document's index
	Kind   string
	Name   string
	Obj    runtime.Object
}

func newDecoder() (runtime.Decoder, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := monitoringv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer(), nil
}

var sourceRE = regexp.MustCompile(`(?m)^# Source: (.+)$`)

// durationRE is the pattern the ServiceMonitor CRD (monitoring.coreos.com/v1) gives a Duration.
var durationRE = regexp.MustCompile(`^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$`)

// Decode reads a stream of YAML documents and decodes each strictly; it returns every
// document's error, not only the first.
func Decode(r io.Reader) ([]Object, []error) {
	dec, err := newDecoder()
	if err != nil {
		return nil, []error{err}
	}
	var objs []Object
	var errs []error
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return objs, append(errs, fmt.Errorf("document %d: %w", i, err))
		}
		source := "document " + strconv.Itoa(i)
		if m := sourceRE.FindSubmatch(doc); m != nil {
			source = string(m[1])
		}
		if isEmpty(doc) {
			continue
		}
		// YAMLToJSONStrict fails on a key given twice, which a YAML-to-JSON step would
		// otherwise settle silently (the last one wins).
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", source, err))
			continue
		}
		obj, gvk, err := dec.Decode(js, nil, nil)
		if err != nil {
			// A strict decoding error still returns the object: it is an error all the same.
			errs = append(errs, fmt.Errorf("%s: %w", source, err))
			continue
		}
		name := ""
		if m, err := meta.Accessor(obj); err == nil {
			name = m.GetName()
		}
		objs = append(objs, Object{Source: source, Kind: gvk.Kind, Name: name, Obj: obj})
	}
	return objs, errs
}

// isEmpty: a document of comments and blank lines only (helm template writes such for a
// template that renders nothing).
func isEmpty(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) > 0 && line[0] != '#' && string(line) != "---" {
			return false
		}
	}
	return true
}

// Rules checks what decoding cannot: names and labels, images, and the pods' hardening.
func Rules(objs []Object) []error {
	var errs []error
	fail := func(o Object, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s %q: %s", o.Source, o.Kind, o.Name, fmt.Sprintf(format, args...)))
	}
	seen := map[string]bool{}
	for _, o := range objs {
		m, err := meta.Accessor(o.Obj)
		if err != nil {
			fail(o, "no metadata: %v", err)
			continue
		}
		if o.Name == "" {
			fail(o, "no metadata.name")
		}
		nameErrs := validation.IsDNS1123Subdomain(o.Name)
		if o.Kind == "Service" {
			nameErrs = validation.IsDNS1035Label(o.Name)
		}
		for _, e := range nameErrs {
			fail(o, "name: %s", e)
		}
		key := o.Kind + "/" + o.Name
		if seen[key] {
			fail(o, "rendered twice")
		}
		seen[key] = true
		errs = append(errs, labelErrs(o, m.GetLabels())...)

		var pod *corev1.PodTemplateSpec
		var selector map[string]string
		switch x := o.Obj.(type) {
		case *appsv1.Deployment:
			pod = &x.Spec.Template
			if x.Spec.Selector != nil {
				selector = x.Spec.Selector.MatchLabels
			}
		case *batchv1.Job:
			pod = &x.Spec.Template
		case *monitoringv1.ServiceMonitor:
			if len(x.Spec.Endpoints) == 0 {
				fail(o, "no endpoints")
			}
			// The Go types make a duration a string; the CRD's schema holds the pattern.
			for i, e := range x.Spec.Endpoints {
				for field, d := range map[string]monitoringv1.Duration{"interval": e.Interval, "scrapeTimeout": e.ScrapeTimeout} {
					if d != "" && !durationRE.MatchString(string(d)) {
						fail(o, "endpoints[%d].%s %q is not a Prometheus duration", i, field, d)
					}
				}
			}
		}
		if pod == nil {
			continue
		}
		errs = append(errs, labelErrs(o, pod.Labels)...)
		for k, v := range selector {
			if pod.Labels[k] != v {
				fail(o, "the selector's %s=%s is not on the pod template", k, v)
			}
		}
		errs = append(errs, podErrs(o, &pod.Spec)...)
	}
	return errs
}

func labelErrs(o Object, labels map[string]string) []error {
	var errs []error
	for k, v := range labels {
		for _, e := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("%s: %s %q: label key %q: %s", o.Source, o.Kind, o.Name, k, e))
		}
		for _, e := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("%s: %s %q: label %s=%q: %s", o.Source, o.Kind, o.Name, k, v, e))
		}
	}
	return errs
}

// Wiring checks that what refers to something finds it: each Service selects the pods of a
// Deployment and its named target ports are ports of their containers; a ServiceMonitor selects
// a Service that has its endpoints' ports; a PodDisruptionBudget selects a Deployment's pods.
func Wiring(objs []Object) []error {
	var errs []error
	fail := func(o Object, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s %q: %s", o.Source, o.Kind, o.Name, fmt.Sprintf(format, args...)))
	}
	type workload struct {
		labels map[string]string
		ports  map[string]bool // container port names and numbers
	}
	var workloads []workload
	var services []*corev1.Service
	for _, o := range objs {
		if d, ok := o.Obj.(*appsv1.Deployment); ok {
			w := workload{labels: d.Spec.Template.Labels, ports: map[string]bool{}}
			for _, c := range d.Spec.Template.Spec.Containers {
				for _, p := range c.Ports {
					w.ports[p.Name] = true
					w.ports[strconv.Itoa(int(p.ContainerPort))] = true
				}
			}
			workloads = append(workloads, w)
		}
		if s, ok := o.Obj.(*corev1.Service); ok {
			services = append(services, s)
		}
	}
	selects := func(selector, labels map[string]string) bool {
		if len(selector) == 0 {
			return false
		}
		for k, v := range selector {
			if labels[k] != v {
				return false
			}
		}
		return true
	}
	for _, o := range objs {
		switch x := o.Obj.(type) {
		case *corev1.Service:
			var selected []workload
			for _, w := range workloads {
				if selects(x.Spec.Selector, w.labels) {
					selected = append(selected, w)
				}
			}
			if len(selected) == 0 {
				fail(o, "selects no Deployment's pods")
			}
			for _, p := range x.Spec.Ports {
				target := p.TargetPort.String()
				if p.TargetPort.IntValue() == 0 && target == "0" {
					target = strconv.Itoa(int(p.Port))
				}
				for _, w := range selected {
					if !w.ports[target] {
						fail(o, "port %s: target port %s is not a port of the pods it selects", p.Name, target)
					}
				}
			}
		case *monitoringv1.ServiceMonitor:
			found := false
			for _, s := range services {
				if !selects(x.Spec.Selector.MatchLabels, s.Labels) {
					continue
				}
				found = true
				for _, e := range x.Spec.Endpoints {
					has := false
					for _, p := range s.Spec.Ports {
						has = has || p.Name == e.Port
					}
					if !has {
						fail(o, "endpoint port %q is not a port of Service %q", e.Port, s.Name)
					}
				}
			}
			if !found {
				fail(o, "selects no Service")
			}
		case *policyv1.PodDisruptionBudget:
			found := false
			for _, w := range workloads {
				found = found || (x.Spec.Selector != nil && selects(x.Spec.Selector.MatchLabels, w.labels))
			}
			if !found {
				fail(o, "selects no Deployment's pods")
			}
		}
	}
	return errs
}

// podErrs: the hardening every pod of the chart has.
func podErrs(o Object, spec *corev1.PodSpec) []error {
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s %q: %s", o.Source, o.Kind, o.Name, fmt.Sprintf(format, args...)))
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		fail("mounts a service account token (automountServiceAccountToken is not false)")
	}
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	emptyDirs := map[string]bool{}
	for _, v := range spec.Volumes {
		if v.EmptyDir != nil {
			emptyDirs[v.Name] = true
		}
	}
	if len(spec.Containers) == 0 {
		fail("no containers")
	}
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		in := func(format string, args ...any) { fail("container %s: %s", c.Name, fmt.Sprintf(format, args...)) }
		if c.Image == "" {
			in("no image")
		}
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		if !isTrue(sc.RunAsNonRoot) && !isTrue(psc.RunAsNonRoot) {
			in("runAsNonRoot is not true")
		}
		if uid := first(sc.RunAsUser, psc.RunAsUser); uid == nil || *uid == 0 {
			in("runAsUser is not a non-root uid")
		}
		if !isTrue(sc.ReadOnlyRootFilesystem) {
			in("readOnlyRootFilesystem is not true")
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			in("allowPrivilegeEscalation is not false")
		}
		if isTrue(sc.Privileged) {
			in("privileged")
		}
		if sc.Capabilities == nil || !dropsAll(sc.Capabilities.Drop) || len(sc.Capabilities.Add) > 0 {
			in("capabilities: drop ALL and add none")
		}
		profile := sc.SeccompProfile
		if profile == nil {
			profile = psc.SeccompProfile
		}
		if profile == nil || profile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			in("seccompProfile is not RuntimeDefault")
		}
		tmp := false
		for _, m := range c.VolumeMounts {
			if m.MountPath == "/tmp" && emptyDirs[m.Name] {
				tmp = true
			}
		}
		if !tmp {
			in("no emptyDir at /tmp (the root filesystem is read-only)")
		}
	}
	return errs
}

func isTrue(b *bool) bool { return b != nil && *b }

func first(a, b *int64) *int64 {
	if a != nil {
		return a
	}
	return b
}

func dropsAll(caps []corev1.Capability) bool {
	for _, c := range caps {
		if c == "ALL" {
			return true
		}
	}
	return false
}

// Counts checks how many objects of each kind were rendered: want is Kind=N,Kind=N.
func Counts(objs []Object, want string) []error {
	if want == "" {
		return nil
	}
	got := map[string]int{}
	for _, o := range objs {
		got[o.Kind]++
	}
	var errs []error
	wanted := map[string]bool{}
	for _, kv := range strings.Split(want, ",") {
		kind, n, ok := strings.Cut(kv, "=")
		count, err := strconv.Atoi(n)
		if !ok || err != nil {
			return []error{fmt.Errorf("-want %q: give Kind=N,Kind=N", want)}
		}
		wanted[kind] = true
		if got[kind] != count {
			errs = append(errs, fmt.Errorf("%d %s rendered, want %d", got[kind], kind, count))
		}
	}
	var extra []string
	for kind := range got {
		if !wanted[kind] {
			extra = append(extra, kind)
		}
	}
	sort.Strings(extra)
	for _, kind := range extra {
		errs = append(errs, fmt.Errorf("%d %s rendered, want none", got[kind], kind))
	}
	return errs
}
