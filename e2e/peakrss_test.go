package e2e_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// peakRSSRunnerEnv, when set, makes this test binary a measuring runner instead of a test run
// (serveMeasuredIfAsked, called first in TestMain).
//
// Why a runner at all: Linux reports a process's peak resident memory (ru_maxrss) as at least
// the resident peak of the memory it replaced at exec (fs/exec.c, setmax_mm_hiwater_rss). Go
// starts a child with vfork, so the memory the child replaces is the parent's: every import
// started straight from this test process reported the test process's own peak (1.6 GiB in a
// loaded CI run, beside the race-detected suite), whatever the importer used. The runner is a
// fresh, small process; what it starts replaces only the runner's memory, so the peak it reads
// back with wait4 is the importer's own.
const peakRSSRunnerEnv = "IDEMGATE_E2E_PEAK_RSS_RUNNER"

// peakRSSFD is the descriptor on which the runner writes the peak, in bytes, as one decimal line.
const peakRSSFD = 3

// measured prepares cmd to run under the runner: the same command, arguments and environment,
// its peak resident memory readable from peakRSS once cmd has run.
func measured(cmd *exec.Cmd) (peakRSS func() (int64, error), err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the test binary to run as the measuring runner: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("open the runner's report pipe: %w", err)
	}
	cmd.Args = append([]string{self}, cmd.Args...)
	cmd.Path = self
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, peakRSSRunnerEnv+"=1")
	cmd.ExtraFiles = []*os.File{w}
	return func() (int64, error) {
		defer r.Close()
		w.Close()
		var peak int64
		if _, err := fmt.Fscan(r, &peak); err != nil {
			return 0, fmt.Errorf("read the runner's report: %w", err)
		}
		return peak, nil
	}, nil
}

// serveMeasuredIfAsked runs, as the measuring runner, the command in os.Args[1:], passing its
// standard streams through, writes its peak resident memory on peakRSSFD and exits with its
// status (128+n when a signal n ended it). It returns when this process is not a runner.
func serveMeasuredIfAsked() {
	if os.Getenv(peakRSSRunnerEnv) == "" {
		return
	}
	report := os.NewFile(peakRSSFD, "peak-rss")
	syscall.CloseOnExec(peakRSSFD) // the command must not hold the report open
	// Pdeathsig is sent when the thread that started the child exits: keep this goroutine on
	// its thread, so that a test that kills the runner (a timeout) kills the command too.
	runtime.LockOSThread()
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = os.Environ() // the runner's own variable does no harm below it
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	case err != nil:
		fmt.Fprintf(os.Stderr, "peak-RSS runner: %v\n", err)
		os.Exit(125)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		fmt.Fprintln(report, strconv.FormatInt(ru.Maxrss<<10, 10)) // Linux counts kilobytes
	}
	os.Exit(code)
}

// TestPeakRSSIsTheCommandsOwn grows this process past 512 MiB, then measures /bin/true: started
// straight from here it would report this process's peak; through the runner it reports its own.
func TestPeakRSSIsTheCommandsOwn(t *testing.T) {
	ballast := make([]byte, 512<<20)
	for i := 0; i < len(ballast); i += os.Getpagesize() {
		ballast[i] = 1 // resident, not only reserved
	}
	var self syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &self))
	require.GreaterOrEqual(t, self.Maxrss<<10, int64(512<<20), "the ballast is resident")

	cmd := exec.Command("/bin/true")
	peakRSS, err := measured(cmd)
	require.NoError(t, err)
	require.NoError(t, cmd.Run())
	peak, err := peakRSS()
	require.NoError(t, err)
	assert.Positive(t, peak)
	assert.Less(t, peak, int64(128<<20), "/bin/true's peak, not this process's")
	runtime.KeepAlive(ballast)
}
