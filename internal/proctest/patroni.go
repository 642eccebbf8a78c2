package proctest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

// Patroni is a PostgreSQL cluster under Patroni, owned by one test: one etcd (the DCS), and
// nodes that each run Patroni with a PostgreSQL it initialises (the first) or clones from
// the leader (the others), all on free loopback ports in temporary directories, in
// synchronous mode (a commit is acknowledged once a synchronous standby has it, and only
// that standby may be promoted). Patroni decides who leads: the test kills, switches over
// and watches, as operators do.
type Patroni struct {
	Nodes []*PatroniNode
	// EtcdPort is etcd's client port.
	EtcdPort int

	dir   string
	runAs *user.User
	etcd  *daemon
}

// PatroniNode is one PostgreSQL server and the Patroni that runs it.
type PatroniNode struct {
	Name    string
	Port    int // PostgreSQL's
	APIPort int // Patroni's REST API
	// Config is the node's Patroni configuration file.
	Config string

	dir    string
	data   string
	daemon *daemon
}

// PatroniConfig is the Patroni configuration of every node the tests run; the fields are
// filled in by NewPatroni. ttl, loop_wait and retry_timeout make a failover take about three
// seconds; primary_start_timeout: 0 makes Patroni fail over at once when the primary's
// postmaster dies, instead of restarting it in place.
const PatroniConfig = `scope: idemgate
namespace: /idemgate/
name: {{name}}
restapi:
  listen: 127.0.0.1:{{api_port}}
  connect_address: 127.0.0.1:{{api_port}}
etcd3:
  hosts: 127.0.0.1:{{etcd_port}}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 3
    primary_start_timeout: 0
    maximum_lag_on_failover: 1048576
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      use_slots: true
      parameters:
        max_connections: 200
        wal_keep_size: 128MB
        fsync: "off"
        full_page_writes: "off"
  initdb:
  - encoding: UTF8
  - locale: C
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{{port}}
  connect_address: 127.0.0.1:{{port}}
  data_dir: {{dir}}/data
  bin_dir: {{bin_dir}}
  pgpass: {{dir}}/pgpass
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: {{dir}}
`

// NewPatroni starts etcd and n nodes under Patroni, and waits until one leads and the others
// stream from it, one of them as the synchronous standby. It returns an error saying why when
// this machine cannot run them (no etcd, patroni or PostgreSQL programs, …); the caller
// decides whether that skips or fails the test. Everything is stopped and removed when the
// test ends.
func NewPatroni(t testing.TB, n int) (*Patroni, error) {
	t.Helper()
	bindir, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("no etcd program (Debian: apt-get install etcd-server): %w", err)
	}
	patroniBin, err := exec.LookPath("patroni")
	if err != nil {
		return nil, fmt.Errorf("no patroni program (Debian: apt-get install patroni python3-etcd): %w", err)
	}
	runAs, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "idemgate-patroni-*")
	if err != nil {
		return nil, err
	}
	p := &Patroni{dir: dir, runAs: runAs}
	// The nodes' directories are made inside it, each given to the server's user; etcd's
	// stays its own.
	if err := chownAll(dir, runAs); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	t.Cleanup(func() {
		// Patroni first: it would restart a PostgreSQL killed under it.
		for _, node := range p.Nodes {
			node.daemon.stop(syscall.SIGTERM, 30*time.Second)
			_ = node.killPostgres()
		}
		if p.etcd != nil {
			p.etcd.stop(syscall.SIGTERM, 10*time.Second)
		}
		if t.Failed() {
			for _, node := range p.Nodes {
				t.Logf("proctest: Patroni log of %s, last lines:\n%s", node.Name, tail(node.daemon.out.String(), 30))
			}
		}
		os.RemoveAll(dir)
	})

	peer, err := freePort()
	if err != nil {
		return nil, err
	}
	if p.EtcdPort, err = freePort(); err != nil {
		return nil, err
	}
	client, peerURL := fmt.Sprintf("http://127.0.0.1:%d", p.EtcdPort), fmt.Sprintf("http://127.0.0.1:%d", peer)
	p.etcd, err = startDaemon(dir, nil, etcdBin, "--name", "etcd0", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "etcd0="+peerURL, "--initial-cluster-state", "new")
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(client+"/health", p.etcd, 30*time.Second); err != nil {
		return nil, fmt.Errorf("etcd: %w\n%s", err, tail(p.etcd.out.String(), 20))
	}

	for i := range n {
		_, err := p.startNode(fmt.Sprintf("node%d", i+1), bindir, patroniBin)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			// The first node bootstraps the cluster; the others clone it once it leads.
			if err := p.waitFor(90*time.Second, "the first node to lead", func(c patroniCluster) bool {
				return c.leader() != ""
			}); err != nil {
				return nil, err
			}
		}
	}
	return p, p.WaitHealthy(120 * time.Second)
}

func (p *Patroni) startNode(name, bindir, patroniBin string) (*PatroniNode, error) {
	dir := filepath.Join(p.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	api, err := freePort()
	if err != nil {
		return nil, err
	}
	node := &PatroniNode{Name: name, Port: port, APIPort: api, dir: dir, data: filepath.Join(dir, "data")}
	node.Config = strings.NewReplacer("{{name}}", name, "{{api_port}}", strconv.Itoa(api), "{{port}}", strconv.Itoa(port),
		"{{etcd_port}}", strconv.Itoa(p.EtcdPort), "{{dir}}", dir, "{{bin_dir}}", bindir).Replace(PatroniConfig)
	conf := filepath.Join(dir, "patroni.yml")
	if err := os.WriteFile(conf, []byte(node.Config), 0o600); err != nil {
		return nil, err
	}
	if err := chownAll(dir, p.runAs); err != nil {
		return nil, err
	}
	if node.daemon, err = startDaemon(dir, p.runAs, patroniBin, conf); err != nil {
		return nil, err
	}
	p.Nodes = append(p.Nodes, node)
	return node, nil
}

// DSN is the URL naming every node, in order, for the read-write one: how the gateway finds
// whichever Patroni made the primary.
func (p *Patroni) DSN() string {
	hosts := make([]string, len(p.Nodes))
	for i, n := range p.Nodes {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", n.Port)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

// DSN is the URL of this node alone.
func (n *PatroniNode) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", n.Port)
}

// Node returns the node named name, or nil.
func (p *Patroni) Node(name string) *PatroniNode {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Leader returns the node that leads, as the DCS has it.
func (p *Patroni) Leader() (*PatroniNode, error) {
	c, err := p.cluster()
	if err != nil {
		return nil, err
	}
	if n := p.Node(c.leader()); n != nil {
		return n, nil
	}
	return nil, errors.New("no leader")
}

// SyncStandby returns the synchronous standby, as the DCS has it.
func (p *Patroni) SyncStandby() (*PatroniNode, error) {
	c, err := p.cluster()
	if err != nil {
		return nil, err
	}
	for _, m := range c.Members {
		if m.Role == "sync_standby" {
			return p.Node(m.Name), nil
		}
	}
	return nil, errors.New("no synchronous standby")
}

// WaitHealthy waits until a node leads, every other node runs as a replica, and one of them
// is the synchronous standby.
func (p *Patroni) WaitHealthy(timeout time.Duration) error {
	return p.waitFor(timeout, "a leader, every replica running, one synchronous", func(c patroniCluster) bool {
		if c.leader() == "" || len(c.Members) != len(p.Nodes) {
			return false
		}
		sync := 0
		for _, m := range c.Members {
			if m.State != "running" && m.State != "streaming" {
				return false
			}
			if m.Role == "sync_standby" {
				sync++
			}
		}
		return sync == 1
	})
}

// WaitLeader waits until the DCS names a leader other than not, and returns it.
func (p *Patroni) WaitLeader(timeout time.Duration, not string) (*PatroniNode, error) {
	var leader string
	err := p.waitFor(timeout, "a new leader", func(c patroniCluster) bool {
		leader = c.leader()
		return leader != "" && leader != not
	})
	if err != nil {
		return nil, err
	}
	return p.Node(leader), nil
}

// Switchover asks Patroni for a planned switchover from the leader to candidate, as an
// operator does (patronictl switchover --force, which does not ask for confirmation).
func (p *Patroni) Switchover(leader, candidate string) error {
	cmd := exec.Command("patronictl", "-c", filepath.Join(p.Node(leader).dir, "patroni.yml"), "switchover",
		"--leader", leader, "--candidate", candidate, "--force")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("patronictl switchover: %w\n%s", err, out)
	}
	return nil
}

// KillPostmaster sends SIGKILL to this node's postmaster and every process it started, as
// the loss of the server would; Patroni, which runs on, notices.
func (n *PatroniNode) KillPostmaster() error { return n.killPostgres() }

func (n *PatroniNode) killPostgres() error {
	b, err := os.ReadFile(filepath.Join(n.data, "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("no running postmaster on %s: %w", n.Name, err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return err
	}
	return killTree(pid)
}

// patroniCluster is Patroni's GET /cluster.
type patroniCluster struct {
	Members []struct {
		Name     string `json:"name"`
		Role     string `json:"role"`
		State    string `json:"state"`
		Timeline int    `json:"timeline"`
	} `json:"members"`
}

func (c patroniCluster) leader() string {
	for _, m := range c.Members {
		if m.Role == "leader" && m.State == "running" {
			return m.Name
		}
	}
	return ""
}

// cluster reads the cluster's state from the REST API of the first node that answers.
func (p *Patroni) cluster() (patroniCluster, error) {
	var last error
	client := http.Client{Timeout: 2 * time.Second}
	for _, n := range p.Nodes {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/cluster", n.APIPort))
		if err != nil {
			last = err
			continue
		}
		var c patroniCluster
		err = json.NewDecoder(resp.Body).Decode(&c)
		resp.Body.Close()
		if err == nil {
			return c, nil
		}
		last = err
	}
	return patroniCluster{}, fmt.Errorf("no Patroni REST API answered: %v", last)
}

// Status describes the cluster in one line, for logs.
func (p *Patroni) Status() string {
	c, err := p.cluster()
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, m := range c.Members {
		parts = append(parts, fmt.Sprintf("%s %s %s tl%d", m.Name, m.Role, m.State, m.Timeline))
	}
	return strings.Join(parts, "; ")
}

func (p *Patroni) waitFor(timeout time.Duration, what string, cond func(patroniCluster) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := p.cluster()
		if err == nil && cond(c) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting %s for %s: last seen %s", timeout, what, p.Status())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// daemon is a long-running program the harness started, with its output.
type daemon struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

func startDaemon(dir string, runAs *user.User, name string, args ...string) (*daemon, error) {
	d := &daemon{cmd: exec.Command(name, args...), out: &syncBuffer{}, done: make(chan struct{})}
	d.cmd.Dir = dir
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.SysProcAttr = asUser(runAs)
	home := dir
	d.cmd.Env = append(os.Environ(), "HOME="+home)
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(name), err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	return d, nil
}

func (d *daemon) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// stop signals the daemon and waits for it, then kills it if it outlived timeout.
func (d *daemon) stop(sig syscall.Signal, timeout time.Duration) {
	if d == nil || d.exited() {
		return
	}
	_ = d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(timeout):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	}
}

// waitHTTP waits until url answers 200, or d exits.
func waitHTTP(url string, d *daemon, timeout time.Duration) error {
	client := http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if d.exited() {
			return errors.New("exited")
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not answering 200 after %s (%v)", url, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killTree sends SIGKILL to pid and its children at once and waits until they are gone.
func killTree(pid int) error {
	procs := append([]int{pid}, childrenOf(pid)...)
	for _, p := range procs {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill %d: %w", p, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range procs {
		for alive(p) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d still alive after SIGKILL", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}
