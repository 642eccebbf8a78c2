package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// RunOptions say how RunPods starts the rendered pods.
type RunOptions struct {
	Podman     []string          // the podman command and its global flags
	Network    string            // podman's --network: a network namespace of the pod's own
	Secrets    map[string]string // "secret/key": the value a secretKeyRef resolves to
	ConfigMaps map[string]string // "configmap/key": the file a configMap volume holds
	Dir        string            // where configMap volumes are made
	Log        io.Writer
}

// RunPods starts the rendered pods in podman the way a kubelet would, as far as a container
// runtime can show it: each Job's container first (it must exit 0: the migration hook), then
// one container per Deployment, each with the rendered args, the environment resolved from the
// Secrets given (dependent variables $(NAME) expanded), the user, the read-only root and
// emptyDirs as tmpfs, no capabilities, no privilege escalation, and its ports published on
// loopback; then each Deployment's startup, readiness and liveness probes must answer 200 and a
// port named metrics must serve /metrics. Every container is stopped with SIGTERM and must exit
// 0. It returns what it started, stopped or not, for the caller's cleanup.
func RunPods(ctx context.Context, objs []Object, opt RunOptions) (started []string, err error) {
	var jobs, deployments []Object
	for _, o := range objs {
		switch o.Obj.(type) {
		case *batchv1.Job:
			jobs = append(jobs, o)
		case *appsv1.Deployment:
			deployments = append(deployments, o)
		}
	}
	if len(deployments) == 0 {
		return nil, fmt.Errorf("no Deployment rendered")
	}
	pm := func(args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, opt.Podman[0], append(append([]string{}, opt.Podman[1:]...), args...)...)
	}
	for _, o := range jobs {
		spec := &o.Obj.(*batchv1.Job).Spec.Template.Spec
		for _, c := range spec.Containers {
			name := "helm-ci-" + o.Name + "-" + c.Name
			args, _, err := runArgs(spec, c, name, opt)
			if err != nil {
				return started, fmt.Errorf("%s: %w", o.Source, err)
			}
			started = append(started, name)
			out, err := pm(append([]string{"run"}, args...)...).CombinedOutput()
			if err != nil {
				return started, fmt.Errorf("job %s, container %s: %w\n%s", o.Name, c.Name, err, out)
			}
			fmt.Fprintf(opt.Log, "Job %s: %s exited 0: %s\n", o.Name, c.Name, strings.TrimSpace(lastLine(out)))
		}
	}
	type running struct {
		o     Object
		c     corev1.Container
		name  string
		ports map[string]int // the container's port names and numbers: the host's port
	}
	var runs []running
	for _, o := range deployments {
		spec := &o.Obj.(*appsv1.Deployment).Spec.Template.Spec
		for _, c := range spec.Containers {
			name := "helm-ci-" + o.Name + "-" + c.Name
			args, ports, err := runArgs(spec, c, name, opt)
			if err != nil {
				return started, fmt.Errorf("%s: %w", o.Source, err)
			}
			started = append(started, name)
			if out, err := pm(append([]string{"run", "-d"}, args...)...).CombinedOutput(); err != nil {
				return started, fmt.Errorf("deployment %s, container %s: %w\n%s", o.Name, c.Name, err, out)
			}
			runs = append(runs, running{o, c, name, ports})
		}
	}
	logs := func(name string) string {
		out, _ := pm("logs", "--tail", "20", name).CombinedOutput()
		return string(out)
	}
	for _, r := range runs {
		for _, p := range []struct {
			kind  string
			probe *corev1.Probe
		}{{"startup", r.c.StartupProbe}, {"readiness", r.c.ReadinessProbe}, {"liveness", r.c.LivenessProbe}} {
			if p.probe == nil {
				continue
			}
			url, err := probeURL(p.probe, r.ports)
			if err != nil {
				return started, fmt.Errorf("deployment %s, container %s, %s probe: %w", r.o.Name, r.c.Name, p.kind, err)
			}
			if err := await(ctx, url, 60*time.Second); err != nil {
				return started, fmt.Errorf("deployment %s, container %s, %s probe: %w\n%s", r.o.Name, r.c.Name, p.kind, err, logs(r.name))
			}
			fmt.Fprintf(opt.Log, "Deployment %s: %s %s probe %s answered 200\n", r.o.Name, r.c.Name, p.kind, p.probe.HTTPGet.Path)
		}
		for _, port := range r.c.Ports {
			if port.Name != "metrics" {
				continue
			}
			url := fmt.Sprintf("http://127.0.0.1:%d/metrics", r.ports["metrics"])
			if err := await(ctx, url, 30*time.Second); err != nil {
				return started, fmt.Errorf("deployment %s, container %s: /metrics: %w\n%s", r.o.Name, r.c.Name, err, logs(r.name))
			}
			fmt.Fprintf(opt.Log, "Deployment %s: %s serves /metrics on its metrics port\n", r.o.Name, r.c.Name)
		}
	}
	// Still running once every probe passed: none of them exited meanwhile (a worker has no
	// probe; this is its check).
	time.Sleep(time.Second)
	for _, r := range runs {
		out, err := pm("inspect", "--format", "{{.State.Running}}", r.name).Output()
		if err != nil || strings.TrimSpace(string(out)) != "true" {
			return started, fmt.Errorf("deployment %s, container %s is not running\n%s", r.o.Name, r.c.Name, logs(r.name))
		}
	}
	for _, r := range runs {
		grace := "30"
		if spec := r.o.Obj.(*appsv1.Deployment).Spec.Template.Spec; spec.TerminationGracePeriodSeconds != nil {
			grace = strconv.FormatInt(*spec.TerminationGracePeriodSeconds, 10)
		}
		if out, err := pm("stop", "-t", grace, r.name).CombinedOutput(); err != nil {
			return started, fmt.Errorf("stop %s: %w\n%s", r.name, err, out)
		}
		out, err := pm("inspect", "--format", "{{.State.ExitCode}}", r.name).Output()
		if err != nil || strings.TrimSpace(string(out)) != "0" {
			return started, fmt.Errorf("deployment %s, container %s: exit code %s after SIGTERM, want 0\n%s",
				r.o.Name, r.c.Name, strings.TrimSpace(string(out)), logs(r.name))
		}
		fmt.Fprintf(opt.Log, "Deployment %s: %s stopped on SIGTERM with exit code 0\n", r.o.Name, r.c.Name)
	}
	return started, nil
}

// runArgs are podman run's arguments for one container of a pod, and the host ports its
// container ports (by name and number) are published on.
func runArgs(spec *corev1.PodSpec, c corev1.Container, name string, opt RunOptions) ([]string, map[string]int, error) {
	args := []string{"--name", name, "--pull", "never", "--network", opt.Network,
		// podman's defaults ask for more than some machines' hard limits allow.
		"--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096"}
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	uid, gid := first(sc.RunAsUser, psc.RunAsUser), first(sc.RunAsGroup, psc.RunAsGroup)
	if uid == nil {
		return nil, nil, fmt.Errorf("container %s: no runAsUser", c.Name)
	}
	user := strconv.FormatInt(*uid, 10)
	if gid != nil {
		user += ":" + strconv.FormatInt(*gid, 10)
	}
	args = append(args, "--user", user)
	if isTrue(sc.ReadOnlyRootFilesystem) {
		args = append(args, "--read-only")
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		args = append(args, "--security-opt", "no-new-privileges")
	}
	if sc.Capabilities != nil {
		for _, d := range sc.Capabilities.Drop {
			args = append(args, "--cap-drop", string(d))
		}
	}
	// The RuntimeDefault seccomp profile is podman's default one.
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		switch {
		case !ok:
			return nil, nil, fmt.Errorf("container %s mounts volume %s, which the pod does not have", c.Name, m.Name)
		case v.EmptyDir != nil:
			args = append(args, "--tmpfs", m.MountPath)
		case v.ConfigMap != nil:
			dir := filepath.Join(opt.Dir, name, v.Name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, nil, err
			}
			found := false
			for k, file := range opt.ConfigMaps {
				cm, key, _ := strings.Cut(k, "/")
				if cm != v.ConfigMap.Name {
					continue
				}
				found = true
				b, err := os.ReadFile(file)
				if err != nil {
					return nil, nil, err
				}
				if err := os.WriteFile(filepath.Join(dir, key), b, 0o644); err != nil {
					return nil, nil, err
				}
			}
			if !found {
				return nil, nil, fmt.Errorf("container %s: ConfigMap %s not given (-configmap %s/KEY=FILE)", c.Name, v.ConfigMap.Name, v.ConfigMap.Name)
			}
			args = append(args, "-v", dir+":"+m.MountPath+":ro")
		default:
			return nil, nil, fmt.Errorf("container %s: volume %s is of a kind this runner does not make", c.Name, m.Name)
		}
	}
	env, err := resolveEnv(c.Env, opt.Secrets)
	if err != nil {
		return nil, nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	ports := map[string]int{}
	for _, p := range c.Ports {
		host, err := freePort()
		if err != nil {
			return nil, nil, err
		}
		ports[strconv.Itoa(int(p.ContainerPort))] = host
		if p.Name != "" {
			ports[p.Name] = host
		}
		args = append(args, "-p", fmt.Sprintf("127.0.0.1:%d:%d", host, p.ContainerPort))
	}
	if len(c.Command) > 0 {
		args = append(args, "--entrypoint", c.Command[0])
	}
	args = append(args, c.Image)
	if len(c.Command) > 1 {
		args = append(args, c.Command[1:]...)
	}
	return append(args, c.Args...), ports, nil
}

var refRE = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// resolveEnv is a container's environment as the kubelet makes it: values from Secrets, and
// $(NAME) replaced by the value of a variable defined before it ($$ is a literal $; a name not
// yet defined stays as written).
func resolveEnv(vars []corev1.EnvVar, secrets map[string]string) ([]string, error) {
	defined := map[string]string{}
	var env []string
	for _, v := range vars {
		value := v.Value
		switch {
		case v.ValueFrom != nil && v.ValueFrom.SecretKeyRef != nil:
			ref := v.ValueFrom.SecretKeyRef
			s, ok := secrets[ref.Name+"/"+ref.Key]
			if !ok {
				if ref.Optional != nil && *ref.Optional {
					continue
				}
				return nil, fmt.Errorf("%s: Secret %s has no key %s (give -secret %s/%s=VALUE)", v.Name, ref.Name, ref.Key, ref.Name, ref.Key)
			}
			value = s
		case v.ValueFrom != nil:
			return nil, fmt.Errorf("%s: a valueFrom this runner does not resolve", v.Name)
		default:
			value = refRE.ReplaceAllStringFunc(value, func(m string) string {
				if m == "$$" {
					return "$"
				}
				if d, ok := defined[m[2:len(m)-1]]; ok {
					return d
				}
				return m
			})
		}
		defined[v.Name] = value
		env = append(env, v.Name+"="+value)
	}
	return env, nil
}

func probeURL(p *corev1.Probe, ports map[string]int) (string, error) {
	if p.HTTPGet == nil {
		return "", fmt.Errorf("not an httpGet probe")
	}
	host, ok := ports[p.HTTPGet.Port.String()]
	if !ok {
		return "", fmt.Errorf("port %s is not a port of the container", p.HTTPGet.Port.String())
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s", host, p.HTTPGet.Path), nil
}

// await GETs url until it answers 200.
func await(ctx context.Context, url string, within time.Duration) error {
	client := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(within)
	last := "no answer"
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("GET %s: %s after %s", url, last, within)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
