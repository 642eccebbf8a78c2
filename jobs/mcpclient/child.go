package mcpclient

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// link is what a pool knows of one session besides the SDK's: whether it was ended because
// an answer passed the server's bound, so the calls it broke can say why.
type link struct {
	oversize atomic.Bool
	// abandoned: the session is closed because the server stopped answering, so closing it
	// gives the child no grace.
	abandoned atomic.Bool
	// broken takes the session out of service at once, before it has finished closing: no
	// call may be sent on a session that no longer reads its answers.
	broken func(why error)
	// limit is the longest line a stdio session reads: the server's max_result_bytes once
	// its tools are listed (the listing itself may be larger, up to MaxListingBytes).
	limit atomic.Int64
	// raw sends the pool's own requests in the session; set while it connects, before the
	// session is handed out.
	raw rawCaller
}

// MaxListingBytes bounds a stdio server's tools/list answer, read once at start.
const MaxListingBytes = 64 << 20

// envelope is room for the JSON-RPC framing around a result of max_result_bytes.
const envelope = 4 << 10

var errAnswerTooLarge = errors.New("the answer passed the server's max_result_bytes")

// childTransport runs a stdio server in a process group of its own, so that stopping it
// stops the children it started (npx starts node, node may start more), and reads its
// standard output line by line with a bound on each line: a server that sends more ends its
// session rather than growing the gateway.
type childTransport struct {
	cmd  *exec.Cmd
	link *link
	// terminate is how long Close waits for the group after closing its input, and again
	// after SIGTERM, before SIGKILL.
	terminate time.Duration
}

var _ mcp.Transport = (*childTransport)(nil)

// CommandTransport runs cmd as a stdio MCP server the way the pool does: in a process group
// of its own, stopped whole when the session closes (its input closed, then SIGTERM and SIGKILL
// to the group, terminate apart), its lines read up to MaxListingBytes. For a one-off session,
// such as tools import's.
func CommandTransport(cmd *exec.Cmd, terminate time.Duration) mcp.Transport {
	l := &link{}
	l.limit.Store(MaxListingBytes)
	return &childTransport{cmd: cmd, link: l, terminate: terminate}
}

func (t *childTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.cmd.Cancel = func() error { return killGroup(t.cmd, syscall.SIGKILL) }
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	out := &lineLimitReader{r: stdout, link: t.link}
	in := &childInput{WriteCloser: stdin, t: t}
	conn, err := (&mcp.IOTransport{Reader: io.NopCloser(out), Writer: in, MaxLineLength: -1}).Connect(ctx)
	if err != nil {
		return nil, err
	}
	rc := newRawConn(conn)
	t.link.raw = rc
	return rc, nil
}

// killGroup signals the child's whole process group.
func killGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, sig)
}

// childInput is the child's standard input; closing it ends the child as MCP's stdio
// transport says (close its input, wait, SIGTERM, wait, SIGKILL), for the whole group, and
// then kills what is left of the group: grandchildren outlive their parent otherwise.
type childInput struct {
	io.WriteCloser
	t    *childTransport
	once sync.Once
	err  error
}

func (c *childInput) Close() error {
	c.once.Do(func() { c.err = c.stop() })
	return c.err
}

func (c *childInput) stop() error {
	_ = c.WriteCloser.Close()
	cmd := c.t.cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(c.t.terminate):
			return nil, false
		}
	}
	if c.t.link.oversize.Load() || c.t.link.abandoned.Load() {
		// It is blocked writing what nobody will read, or answers nothing: no grace.
		_ = killGroup(cmd, syscall.SIGKILL)
	}
	err, ok := wait()
	if !ok {
		_ = killGroup(cmd, syscall.SIGTERM)
		if err, ok = wait(); !ok {
			_ = killGroup(cmd, syscall.SIGKILL)
			err, _ = wait()
		}
	}
	_ = killGroup(cmd, syscall.SIGKILL) // what the child left behind
	return err
}

// lineLimitReader passes standard output through, failing once a line passes the link's
// limit: the session then ends, and the calls it carried are ambiguous.
type lineLimitReader struct {
	r    io.Reader
	link *link
	line int64
}

func (l *lineLimitReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	limit := l.link.limit.Load()
	chunk := p[:n]
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			l.line += int64(len(chunk))
			break
		}
		l.line += int64(i)
		if l.line > limit {
			break
		}
		l.line = 0
		chunk = chunk[i+1:]
	}
	if l.line > limit {
		if !l.link.oversize.Swap(true) && l.link.broken != nil {
			l.link.broken(errAnswerTooLarge)
		}
		return 0, errAnswerTooLarge
	}
	return n, err
}

// stderrLog makes a child's standard error into log lines that cannot carry what the
// gateway keeps secret: each line is scrubbed of the server's credentials and of the
// sensitive params of its recent calls, cut at maxLine bytes, and lines beyond a rate are
// counted instead of logged.
type stderrLog struct {
	log   *slog.Logger
	scrub func(string) string

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	dropped int
}

const (
	maxStderrLine  = 1 << 10
	stderrPerSec   = 20
	stderrBurst    = 100
	stderrScanSize = 64 << 10
)

func newStderrLog(log *slog.Logger, scrub func(string) string) io.Writer {
	l := &stderrLog{log: log, scrub: scrub, tokens: stderrBurst}
	r, w := io.Pipe()
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 4096), stderrScanSize)
		for sc.Scan() {
			l.line(sc.Text())
		}
		_, _ = io.Copy(io.Discard, r) // a line too long: keep draining so the child never blocks
	}()
	return w
}

func (l *stderrLog) line(text string) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() {
		l.tokens = min(stderrBurst, l.tokens+now.Sub(l.last).Seconds()*stderrPerSec)
	}
	l.last = now
	if l.tokens < 1 {
		l.dropped++
		l.mu.Unlock()
		return
	}
	l.tokens--
	dropped := l.dropped
	l.dropped = 0
	l.mu.Unlock()
	if dropped > 0 {
		l.log.Warn("mcp server stderr: lines not logged (more than the rate allows)", "lines", dropped)
	}
	l.log.Info("mcp server stderr", "line", cut(l.scrub(text), maxStderrLine))
}

// cut shortens s to at most n bytes, on a character boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + fmt.Sprintf("… (%d bytes more)", len(s)-n)
}
