package proctest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PgBouncer is a private PgBouncer owned by one test, in front of one PostgreSQL server, in
// transaction pooling mode: each transaction (and each statement outside one) is lent
// whichever server connection is free, so nothing a client leaves on a server session (a
// prepared statement, a LISTEN, a SET) is there for its next transaction. Every database name
// is passed through to the server, and authentication is trust, as the test PostgreSQL's.
type PgBouncer struct {
	Port int
	// Config is the configuration file it runs with (printed in docs/OPERATIONS.md).
	Config string

	dir  string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// PgBouncerConfig is the configuration the tests run PgBouncer with; %[1]s is the server's
// host, %[2]d its port, %[3]d PgBouncer's port and %[4]s its directory.
const PgBouncerConfig = `[databases]
; every database name the client asks for, on the one server
* = host=%[1]s port=%[2]d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %[3]d
unix_socket_dir =
auth_type = trust
auth_file = %[4]s/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 20
; pgx sends no startup parameter PgBouncer does not know, but other clients do
ignore_startup_parameters = extra_float_digits
logfile = %[4]s/pgbouncer.log
pidfile = %[4]s/pgbouncer.pid
`

// NewPgBouncer starts PgBouncer on a free loopback port in front of the PostgreSQL server at
// host:port, as user postgres when running as root (PgBouncer refuses to run as root). It
// returns an error saying why when this machine cannot run one; the caller decides whether
// that skips or fails the test. It is stopped when the test ends.
func NewPgBouncer(t testing.TB, host string, port int) (*PgBouncer, error) {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		return nil, fmt.Errorf("no pgbouncer program (Debian: apt-get install pgbouncer): %w", err)
	}
	runAs, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "idemgate-pgbouncer-*")
	if err != nil {
		return nil, err
	}
	b := &PgBouncer{dir: dir, log: filepath.Join(dir, "pgbouncer.log"), done: make(chan struct{})}
	t.Cleanup(func() {
		b.stop()
		os.RemoveAll(dir)
	})
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(`"postgres" ""`+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := chownAll(dir, runAs); err != nil {
		return nil, err
	}
	var lastErr error
	for range 3 {
		if b.Port, err = freePort(); err != nil {
			return nil, err
		}
		b.Config = fmt.Sprintf(PgBouncerConfig, host, port, b.Port, dir)
		conf := filepath.Join(dir, "pgbouncer.ini")
		if err := os.WriteFile(conf, []byte(b.Config), 0o644); err != nil {
			return nil, err
		}
		if err := chownAll(dir, runAs); err != nil {
			return nil, err
		}
		b.cmd = exec.Command(bin, conf)
		b.cmd.Dir = dir
		b.cmd.SysProcAttr = asUser(runAs)
		if err := b.cmd.Start(); err != nil {
			return nil, fmt.Errorf("start pgbouncer: %w", err)
		}
		b.done = make(chan struct{})
		go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(b.cmd, b.done)
		if lastErr = waitListening(b.Port, b.done, 15*time.Second); lastErr == nil {
			return b, nil
		}
		b.stop()
		lastErr = fmt.Errorf("pgbouncer on port %d: %w\n%s", b.Port, lastErr, b.Log())
	}
	return nil, lastErr
}

// DSN is the URL of database db through this PgBouncer, in the mode the gateway needs there
// (default_query_exec_mode=exec: see models.TransactionPooled).
func (b *PgBouncer) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&default_query_exec_mode=exec", b.Port, db)
}

// Log returns PgBouncer's log.
func (b *PgBouncer) Log() string {
	out, _ := os.ReadFile(b.log)
	return string(out)
}

func (b *PgBouncer) stop() {
	if b.cmd == nil || b.cmd.Process == nil {
		return
	}
	select {
	case <-b.done:
		return
	default:
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM) // immediate shutdown (SIGINT would wait for clients)
	select {
	case <-b.done:
	case <-time.After(2 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.done
	}
}

// serverUser is the user the server programs run as: postgres when running as root (they
// refuse root), else nil (the current user).
func serverUser() (*user.User, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root and there is no postgres user to run the servers as: %w", err)
	}
	return u, nil
}

// asUser makes a command run as u (nil: as the current user).
func asUser(u *user.User) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if u != nil {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	return attr
}

// chownAll gives dir and everything in it to u (nil: nothing to do).
func chownAll(dir string, u *user.User) error {
	if u == nil {
		return nil
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// waitListening waits until something accepts TCP connections on 127.0.0.1:port, or the
// process whose end closes exited is gone.
func waitListening(port int, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before listening")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening after %s: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// HostPort splits a PostgreSQL URL's first host into host and port (default 5432).
func HostPort(dsn string) (string, int) {
	rest := dsn[strings.Index(dsn, "://")+3:]
	rest, _, _ = strings.Cut(rest, "/")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	rest, _, _ = strings.Cut(rest, ",")
	host, port, err := net.SplitHostPort(rest)
	if err != nil {
		return rest, 5432
	}
	p, _ := strconv.Atoi(port)
	return host, p
}
