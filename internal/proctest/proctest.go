// Package proctest runs real idemgate processes for end-to-end tests: it builds the binary
// once, runs its administrative subcommands, starts `serve` and `worker` processes against a
// database, and stops them the way production stops them (SIGTERM) or the way a crash does
// (SIGKILL). It can also run a private PostgreSQL cluster that a test stops and starts at will
// (see Postgres).
//
// Every process's standard output and error are kept; they are printed when the test fails,
// and a data race reported by a -race binary fails the test.
package proctest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Module is the import path of the idemgate command.
const Module = "github.com/idemgate/idemgate/cmd/idemgate"

// RaceEnv, set to "0", builds the binary without the race detector.
const RaceEnv = "IDEMGATE_PROCTEST_RACE"

// Build compiles the idemgate binary into a new temporary directory and returns its path and a
// function removing it. With race, the binary is built with the race detector.
func Build(race bool) (bin string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "idemgate-bin-*")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	bin = filepath.Join(dir, "idemgate")
	args := []string{"build"}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "-o", bin, Module)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return bin, cleanup, nil
}

// RaceWanted reports whether Build should use the race detector (RaceEnv not "0").
func RaceWanted() bool { return os.Getenv(RaceEnv) != "0" }

// Env is what every process of one test shares: the binary and the database.
type Env struct {
	Bin string
	DSN string // IDEMGATE_DATABASE_URL
	// Extra holds more NAME=value pairs for every process.
	Extra []string
}

// environ is the process environment: the test's own, minus any IDEMGATE_ setting that could
// leak in from the developer's shell, plus the database.
func (e Env) environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IDEMGATE_") {
			env = append(env, kv)
		}
	}
	env = append(env, "IDEMGATE_DATABASE_URL="+e.DSN, "IDEMGATE_LOG_LEVEL=info",
		// A race report should not wait for the process to exit: SIGKILLed processes never do.
		"GORACE=halt_on_error=0 atexit_sleep_ms=0")
	return append(env, e.Extra...)
}

// Run runs a command that ends by itself (tenant create, apikey create, migrate…) and returns
// its standard output. A non-zero exit fails t.
func (e Env) Run(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, err := e.RunErr(args...)
	if err != nil {
		t.Fatalf("proctest: idemgate %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// RunErr is Run without a test: it returns standard output, standard error and the error.
func (e Env) RunErr(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Bin, args...)
	cmd.Env = e.environ()
	var o, eo bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &eo
	err = cmd.Run()
	return o.String(), eo.String(), err
}

// Process is a running `idemgate serve` or `idemgate worker`.
type Process struct {
	Name string
	URL  string // http://ADDR, for serve
	// MetricsURL is http://ADDR/metrics, for a process started with --metrics-addr.
	MetricsURL string
	Worker     string // the worker name it leases with
	PID        int

	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	state  *os.ProcessState

	mu       sync.Mutex
	signaled bool
}

// StartTimeout bounds how long a process may take to print that it is ready.
var StartTimeout = 90 * time.Second

// Start starts `idemgate args…` (serve or worker) and waits until it says it is ready. The
// process is killed when the test ends, if it still runs; its output is printed if the test
// failed, and a data race report in it fails the test.
func (e Env) Start(t testing.TB, name string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(e.Bin, args...)
	cmd.Env = e.environ()
	out := &syncBuffer{}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatalf("proctest: start %s: %v", name, err)
	}
	p := &Process{Name: name, PID: cmd.Process.Pid, cmd: cmd, out: out, exited: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			out.Write([]byte(line + "\n"))
			if m, ok := strings.CutPrefix(line, "metrics at "); ok {
				p.MetricsURL = m // printed before the ready line, so read before Start returns
			}
			if strings.HasPrefix(line, "idemgate listening on ") || strings.HasPrefix(line, "idemgate worker ") {
				select {
				case ready <- line:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() { p.cleanup(t) })

	select {
	case line := <-ready:
		p.parseReady(line)
	case <-p.exited:
		t.Fatalf("proctest: %s exited before it was ready (%v):\n%s", name, p.state, out.String())
	case <-time.After(StartTimeout):
		t.Fatalf("proctest: %s not ready after %s:\n%s", name, StartTimeout, out.String())
	}
	return p
}

// parseReady reads "idemgate listening on http://ADDR (worker NAME, postgres ledger)" or
// "idemgate worker NAME running (postgres ledger)".
func (p *Process) parseReady(line string) {
	if rest, ok := strings.CutPrefix(line, "idemgate listening on "); ok {
		url, more, _ := strings.Cut(rest, " ")
		p.URL = url
		if w, ok := strings.CutPrefix(more, "(worker "); ok {
			p.Worker, _, _ = strings.Cut(w, ",")
		}
		return
	}
	rest := strings.TrimPrefix(line, "idemgate worker ")
	p.Worker, _, _ = strings.Cut(rest, " ")
}

func (p *Process) cleanup(t testing.TB) {
	if !p.Exited() {
		p.markSignaled()
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	out := p.out.String()
	if strings.Contains(out, "WARNING: DATA RACE") {
		t.Errorf("proctest: %s reported a data race:\n%s", p.Name, out)
		return
	}
	p.mu.Lock()
	signaled := p.signaled
	p.mu.Unlock()
	if !signaled {
		t.Errorf("proctest: %s exited on its own (%v) while the test expected it running:\n%s", p.Name, p.state, tail(out, 80))
		return
	}
	if t.Failed() {
		t.Logf("proctest: output of %s (pid %d, %v), last lines:\n%s", p.Name, p.PID, p.state, tail(out, 60))
	}
}

func (p *Process) markSignaled() {
	p.mu.Lock()
	p.signaled = true
	p.mu.Unlock()
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.exited }

// Kill sends SIGKILL, as a crash or the OOM killer would, and waits until the process is gone.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	p.markSignaled()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("proctest: kill %s: %v", p.Name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("proctest: %s still running 30s after SIGKILL", p.Name)
	}
}

// Terminate sends SIGTERM, as an orchestrator does, and waits up to timeout for the process to
// exit. It returns how long the process took; t fails if it did not exit in time.
func (p *Process) Terminate(t testing.TB, timeout time.Duration) time.Duration {
	t.Helper()
	p.markSignaled()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("proctest: terminate %s: %v", p.Name, err)
	}
	select {
	case <-p.exited:
		return time.Since(start)
	case <-time.After(timeout):
		t.Fatalf("proctest: %s still running %s after SIGTERM:\n%s", p.Name, timeout, tail(p.out.String(), 40))
		return 0
	}
}

// ExitCode is the process's exit code once it has ended (-1 when killed by a signal).
func (p *Process) ExitCode() int {
	<-p.exited
	return p.state.ExitCode()
}

// Output returns everything the process wrote so far (standard output and error).
func (p *Process) Output() string { return p.out.String() }

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("… (%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
