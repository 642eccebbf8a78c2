package proctest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// NewStandby makes a streaming replica of pg, as operators make one: pg_basebackup -R (which
// writes standby.signal and primary_conninfo) into a new temporary directory, started on a
// free port of its own. It is asynchronous until the primary names it in
// synchronous_standby_names (see MakeSynchronous). It is stopped and removed when the test
// ends.
func (pg *Postgres) NewStandby(t testing.TB) (*Postgres, error) {
	t.Helper()
	sb, err := newCluster(t, pg.bindir, pg.runAs)
	if err != nil {
		return nil, err
	}
	if out, err := sb.run(filepath.Join(sb.bindir, "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(pg.Port),
		"-U", "postgres", "-D", sb.data, "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return nil, fmt.Errorf("pg_basebackup: %w\n%s", err, out)
	}
	if err := sb.startOnFreePort(); err != nil {
		return nil, err
	}
	// Wait until it streams: a standby that has not connected yet would make the first
	// synchronous commit wait, and a failover before then would test nothing.
	err = pg.waitFor(30*time.Second, "the standby to stream", func(c *pgx.Conn) (bool, error) {
		var n int
		err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'").Scan(&n)
		return n > 0, err
	})
	return sb, err
}

// MakeSynchronous makes every commit on pg wait until a standby has it
// (synchronous_standby_names = '*'), and waits until the standby is listed as synchronous.
func (pg *Postgres) MakeSynchronous() error {
	if err := pg.Exec("ALTER SYSTEM SET synchronous_standby_names = '*'", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	return pg.waitFor(30*time.Second, "a synchronous standby", func(c *pgx.Conn) (bool, error) {
		var n int
		err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'").Scan(&n)
		return n > 0, err
	})
}

// Detach cuts a standby off from its primary (primary_conninfo emptied and reloaded), as a
// network partition between them would: it keeps what it has replayed and receives nothing
// more. Commits on an asynchronous primary go on being acknowledged without it.
func (pg *Postgres) Detach() error {
	if err := pg.Exec("ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()"); err != nil {
		return err
	}
	return pg.waitFor(30*time.Second, "the WAL receiver to stop", func(c *pgx.Conn) (bool, error) {
		var n int
		err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_wal_receiver").Scan(&n)
		return n == 0, err
	})
}

// Promote makes a standby the primary (pg_ctl promote) and waits until it accepts writes.
func (pg *Postgres) Promote() error { return pg.ctl("promote", "-w", "-t", "60") }

// Kill sends SIGKILL to the postmaster and every process it started, at once, as the loss
// of the database host would: nothing is flushed, no connection is closed politely, and the
// server never comes back on its own. (Stop is a fast crash of the server that a Start can
// recover; Kill leaves a cluster for dead.)
func (pg *Postgres) Kill() error {
	pid, err := pg.postmasterPID()
	if err != nil {
		return err
	}
	return killTree(pid)
}

// Exec runs statements on the cluster, each on its own, outside any transaction (ALTER SYSTEM
// may not run in one).
func (pg *Postgres) Exec(stmts ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		return fmt.Errorf("connect to port %d: %w", pg.Port, err)
	}
	defer c.Close(context.Background())
	for _, s := range stmts {
		if _, err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s on port %d: %w", s, pg.Port, err)
		}
	}
	return nil
}

// waitFor polls cond on a connection to pg every 20 ms until it holds.
func (pg *Postgres) waitFor(timeout time.Duration, what string, cond func(*pgx.Conn) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := pgx.Connect(ctx, pg.DSN)
	if err != nil {
		return fmt.Errorf("connect to port %d: %w", pg.Port, err)
	}
	defer c.Close(context.Background())
	var last error
	for {
		ok, err := cond(c)
		if ok && err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s on port %d: %w (last error: %v)", what, pg.Port, ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (pg *Postgres) postmasterPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(pg.data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("no running postmaster: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strconv.Atoi(strings.TrimSpace(first))
}

// alive reports whether process pid still runs: it exists and is not a zombie waiting for
// its new parent to reap it (a killed postmaster's children are orphans).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc: existence is all we can tell
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// childrenOf lists the processes whose parent is pid, read from /proc.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid …": comm may hold spaces and parentheses, so read after the
		// last ")".
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// MultiHostDSN is the URL naming every cluster given, in order, as operators name a primary
// and its standbys: the gateway must find the one that accepts writes.
func MultiHostDSN(clusters ...*Postgres) string {
	hosts := make([]string, len(clusters))
	for i, c := range clusters {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", c.Port)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}
