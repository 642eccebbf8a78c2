package main

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestResolveEnv: Secrets resolved, and $(NAME) expanded as the kubelet does.
func TestResolveEnv(t *testing.T) {
	env, err := resolveEnv([]corev1.EnvVar{
		{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "url"}}},
		{Name: "URL", Value: "$(FROM_SECRET)&default_query_exec_mode=exec"},
		{Name: "LATER", Value: "$(NOT_YET) $$(URL)"},
		{Name: "NOT_YET", Value: "x"},
	}, map[string]string{"db/url": "postgres://h/db?sslmode=disable"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"FROM_SECRET=postgres://h/db?sslmode=disable",
		"URL=postgres://h/db?sslmode=disable&default_query_exec_mode=exec", "LATER=$(NOT_YET) $(URL)", "NOT_YET=x"}
	if !slices.Equal(env, want) {
		t.Errorf("env:\n%q\nwant\n%q", env, want)
	}
	_, err = resolveEnv([]corev1.EnvVar{{Name: "K", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "keys"}, Key: "k"}}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "-secret keys/k=VALUE") {
		t.Errorf("a missing Secret: %v", err)
	}
}

// TestRunArgs: the container's security context becomes podman's flags.
func TestRunArgs(t *testing.T) {
	objs, errs := Decode(strings.NewReader(good))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	spec := &objs[0].Obj.(*appsv1.Deployment).Spec.Template.Spec
	args, ports, err := runArgs(spec, spec.Containers[0], "c", RunOptions{Network: "none"})
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(args, " ")
	for _, want := range []string{"--user 65532 ", "--read-only", "--security-opt no-new-privileges", "--cap-drop ALL",
		"--tmpfs /tmp", "--network none", "--pull never", " idemgate:devel serve"} {
		if !strings.Contains(line, want) {
			t.Errorf("podman run %s\nhas no %q", line, want)
		}
	}
	if ports["http"] == 0 || ports["http"] != ports["8080"] || ports["metrics"] == 0 {
		t.Errorf("ports: %v", ports)
	}
}
