package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

// kv is a repeatable NAME=VALUE flag.
type kv map[string]string

func (m kv) String() string { return fmt.Sprint(map[string]string(m)) }
func (m kv) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want NAME/KEY=VALUE, got %q", s)
	}
	m[k] = v
	return nil
}

func main() {
	want := flag.String("want", "", "how many objects of each kind must render, e.g. Deployment=2,Job=1 (any other kind fails)")
	run := flag.Bool("run", false, "then run the rendered Jobs and Deployments in podman (RunPods)")
	podman := flag.String("podman", "podman", "the podman command, with its global flags")
	network := flag.String("network", "slirp4netns:allow_host_loopback=true", "podman's --network for each container")
	secrets, configMaps := kv{}, kv{}
	flag.Var(secrets, "secret", "NAME/KEY=VALUE: a Secret's value, for -run (repeatable)")
	flag.Var(configMaps, "configmap", "NAME/KEY=FILE: a ConfigMap's file, for -run (repeatable)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: check [-want Kind=N,…] [-run -secret NAME/KEY=VALUE…] [FILE…]  (no FILE: standard input)")
		flag.PrintDefaults()
	}
	flag.Parse()
	objs, err := checkFiles(flag.Args(), *want, os.Stdin, os.Stdout)
	if err == nil && *run {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		err = runAndClean(ctx, objs, strings.Fields(*podman), *network, secrets, configMaps)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func runAndClean(ctx context.Context, objs []Object, podman []string, network string, secrets, configMaps kv) error {
	dir, err := os.MkdirTemp("", "helm-ci-pods-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	started, err := RunPods(ctx, objs, RunOptions{Podman: podman, Network: network, Secrets: secrets,
		ConfigMaps: configMaps, Dir: dir, Log: os.Stdout})
	if len(started) > 0 {
		rm := exec.Command(podman[0], append(append(append([]string{}, podman[1:]...), "rm", "-f", "-t", "0"), started...)...)
		if out, rmErr := rm.CombinedOutput(); rmErr != nil && err == nil {
			err = fmt.Errorf("podman rm: %w\n%s", rmErr, out)
		}
	}
	return err
}

func checkFiles(files []string, want string, stdin io.Reader, stdout io.Writer) ([]Object, error) {
	var readers []io.Reader
	for _, f := range files {
		file, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		defer file.Close()
		readers = append(readers, file, strings.NewReader("\n---\n"))
	}
	in := stdin
	if len(readers) > 0 {
		in = io.MultiReader(readers...)
	}
	objs, errs := Decode(in)
	errs = append(errs, Rules(objs)...)
	errs = append(errs, Wiring(objs)...)
	errs = append(errs, Counts(objs, want)...)
	if len(objs) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("no manifests"))
	}
	for _, err := range errs {
		fmt.Fprintln(stdout, "FAIL", err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%d of the rendered manifests' checks failed", len(errs))
	}
	for _, o := range objs {
		fmt.Fprintf(stdout, "ok   %s/%s (%s)\n", o.Kind, o.Name, o.Source)
	}
	return objs, nil
}
