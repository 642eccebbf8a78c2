package proctest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Postgres is a private PostgreSQL cluster owned by one test: initdb'd into a temporary
// directory, with trust authentication on 127.0.0.1 and a Unix socket in that directory. The
// test may stop it (as a crash would) and start it again on the same port.
type Postgres struct {
	DSN  string
	Port int

	bindir string
	dir    string
	data   string
	log    string
	runAs  *user.User // set when running as root: PostgreSQL refuses to run as root
	// netns and host, when set (NewPostgresIn), run the server in that network namespace,
	// listening on host instead of 127.0.0.1.
	netns, host string
}

// postgresTools are the server programs the tests run, all from one installation.
var postgresTools = []string{"initdb", "pg_ctl", "postgres", "pg_basebackup"}

// postgresBinDir finds the directory holding every one of postgresTools: pg_ctl's on PATH
// (its symbolic links followed: distributions link a few programs into /usr/bin or
// /usr/local/bin, not all), else the newest /usr/lib/postgresql/*/bin.
func postgresBinDir() (string, error) {
	var candidates []string
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) > versionOf(matches[j]) })
	for _, m := range matches {
		candidates = append(candidates, filepath.Dir(m))
	}
	for _, dir := range candidates {
		complete := true
		for _, tool := range postgresTools {
			if _, err := os.Stat(filepath.Join(dir, tool)); err != nil {
				complete = false
			}
		}
		if complete {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL installation with %s (looked at pg_ctl on PATH and /usr/lib/postgresql/*/bin)",
		strings.Join(postgresTools, ", "))
}

func versionOf(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// NewPostgres initialises and starts a private cluster. It returns an error saying why when
// this machine cannot run one (no binaries, running as root without a postgres user, …); the
// caller decides whether that skips or fails the test. The cluster is stopped and removed when
// the test ends.
func NewPostgres(t testing.TB) (*Postgres, error) {
	t.Helper()
	return newPostgres(t, "", "")
}

// NewPostgresIn is NewPostgres with the server in network namespace netns, listening on host
// (an address of that namespace): the network between it and its clients can then be faulted.
func NewPostgresIn(t testing.TB, netns, host string) (*Postgres, error) {
	t.Helper()
	return newPostgres(t, netns, host)
}

func newPostgres(t testing.TB, netns, host string) (*Postgres, error) {
	t.Helper()
	bindir, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	var runAs *user.User
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and there is no postgres user to run PostgreSQL as: %w", err)
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			return nil, fmt.Errorf("running as root and runuser is missing: %w", err)
		}
		runAs = u
	}
	pg, err := newCluster(t, bindir, runAs)
	if err != nil {
		return nil, err
	}
	pg.netns, pg.host = netns, host
	if out, err := pg.run(filepath.Join(bindir, "initdb"), "-D", pg.data, "-A", "trust", "-U", "postgres",
		"-E", "UTF8", "--no-sync", "--locale=C"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	if host != "" {
		// Its clients come from the other end of the namespace's link, not from loopback.
		hba, err := os.OpenFile(filepath.Join(pg.data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		_, err = fmt.Fprintf(hba, "host all all %s/16 trust\n", host)
		if cerr := hba.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
	}
	if err := pg.startOnFreePort(); err != nil {
		return nil, err
	}
	return pg, nil
}

// newCluster makes the directory of a cluster that is not initialised yet, owned by the user
// the server runs as, and removes it (after an immediate stop) when the test ends.
func newCluster(t testing.TB, bindir string, runAs *user.User) (*Postgres, error) {
	// Not t.TempDir(): its parents are private to root, and the server runs as postgres.
	dir, err := os.MkdirTemp("", "idemgate-pg-*")
	if err != nil {
		return nil, err
	}
	pg := &Postgres{bindir: bindir, runAs: runAs, dir: dir, data: filepath.Join(dir, "data"), log: filepath.Join(dir, "postgres.log")}
	t.Cleanup(func() {
		_ = pg.ctl("stop", "-m", "immediate", "-w", "-t", "30")
		os.RemoveAll(dir)
	})
	if runAs != nil {
		uid, _ := strconv.Atoi(runAs.Uid)
		gid, _ := strconv.Atoi(runAs.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, fmt.Errorf("chown %s to postgres: %w", dir, err)
		}
	}
	return pg, nil
}

// startOnFreePort starts the cluster on a free port; if another process takes the port before
// the server binds, it tries another.
func (pg *Postgres) startOnFreePort() error {
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return err
		}
		pg.Port = port
		if lastErr = pg.Start(); lastErr == nil {
			pg.DSN = fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=disable", pg.listen(), pg.Port)
			return nil
		}
	}
	return lastErr
}

// Start starts the cluster (again) on its port and waits until it accepts connections.
func (pg *Postgres) Start() error {
	// fsync=off only risks data if the operating system crashes; an immediate stop (a crash of
	// the server processes) loses nothing. synchronous_commit stays on: with it off, an
	// immediate stop would lose acknowledged commits, and the gateway with them.
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=%s -c fsync=off -c full_page_writes=off "+
		"-c max_connections=200", pg.Port, pg.dir, pg.listen())
	if err := pg.ctl("start", "-w", "-t", "60", "-o", opts, "-l", pg.log); err != nil {
		return fmt.Errorf("pg_ctl start on port %d: %w\n%s", pg.Port, err, pg.Log())
	}
	return nil
}

// Stop stops the cluster in mode immediate: every backend is killed at once, as a crash of
// the database host would, and the next Start runs crash recovery.
func (pg *Postgres) Stop() error { return pg.ctl("stop", "-m", "immediate", "-w", "-t", "60") }

// Log returns the server log.
func (pg *Postgres) Log() string {
	b, _ := os.ReadFile(pg.log)
	return string(b)
}

func (pg *Postgres) ctl(args ...string) error {
	out, err := pg.run(filepath.Join(pg.bindir, "pg_ctl"), append([]string{"-D", pg.data}, args...)...)
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(out))
	}
	return nil
}

// listen is the address the server listens on.
func (pg *Postgres) listen() string {
	if pg.host != "" {
		return pg.host
	}
	return "127.0.0.1"
}

func (pg *Postgres) run(name string, args ...string) (string, error) {
	argv := append([]string{name}, args...)
	if pg.runAs != nil {
		argv = append([]string{"runuser", "-u", pg.runAs.Username, "--"}, argv...)
	}
	if pg.netns != "" {
		argv = append([]string{"ip", "netns", "exec", pg.netns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = pg.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pg_ctl start leaves the server running; should it hold our pipe open, do not wait for it.
	cmd.WaitDelay = 2 * time.Second
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return "", err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		return out.String(), fmt.Errorf("%s timed out", filepath.Base(name))
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
