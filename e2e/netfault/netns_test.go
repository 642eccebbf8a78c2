package netfault_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The network the tests fault, made by the test itself and gone when it ends: two network
// namespaces joined by a veth pair, the gateway's end in one and the downstream's in the
// other, with nftables rules in the downstream's namespace only. Nothing is added to the
// namespace the test runs in (the host's). It needs root, ip and nft.

// link is a veth pair between two namespaces of the test's own.
type link struct {
	near, far     string // namespace names: the gateway's side, the downstream's side
	nearIP, farIP string
}

// requireNetAdmin skips the test, saying why, where namespaces cannot be made.
func requireNetAdmin(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network-fault tests make network namespaces: run as root (CI does)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("network-fault tests need %s (Debian: iproute2, nftables): %v", tool, err)
		}
	}
}

// sh runs a command and fails the test when it fails.
func sh(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// newLink makes two namespaces and a veth pair between them, on a /24 of 10.48.0.0/16 chosen
// at random, and removes them when t ends.
func newLink(t *testing.T) *link {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	l := &link{near: "i48n-" + id, far: "i48f-" + id,
		nearIP: fmt.Sprintf("10.48.%d.1", b[0]), farIP: fmt.Sprintf("10.48.%d.2", b[0])}
	for _, ns := range []string{l.near, l.far} {
		sh(t, "ip", "netns", "add", ns)
		t.Cleanup(func() {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				t.Logf("ip netns del %s: %v %s", ns, err, out)
			}
		})
		sh(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	// Both ends are made inside their namespaces: nothing appears in the host's.
	sh(t, "ip", "link", "add", "vnear", "netns", l.near, "type", "veth", "peer", "name", "vfar", "netns", l.far)
	sh(t, "ip", "-n", l.near, "addr", "add", l.nearIP+"/24", "dev", "vnear")
	sh(t, "ip", "-n", l.far, "addr", "add", l.farIP+"/24", "dev", "vfar")
	sh(t, "ip", "-n", l.near, "link", "set", "vnear", "up")
	sh(t, "ip", "-n", l.far, "link", "set", "vfar", "up")
	return l
}

// loss drops pct % of the packets through the downstream's end, each way, at random, until
// heal.
func (l *link) loss(t *testing.T, pct int) {
	t.Helper()
	rules := fmt.Sprintf(`table inet fault {
	chain in { type filter hook input priority 0; policy accept; iifname "vfar" numgen random mod 100 < %d drop; }
	chain out { type filter hook output priority 0; policy accept; oifname "vfar" numgen random mod 100 < %d drop; }
}
`, pct, pct)
	f, err := os.CreateTemp(t.TempDir(), "fault-*.nft")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(rules); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sh(t, "ip", "netns", "exec", l.far, "nft", "-f", f.Name())
}

// heal removes the faults.
func (l *link) heal(t *testing.T) {
	t.Helper()
	sh(t, "ip", "netns", "exec", l.far, "nft", "delete", "table", "inet", "fault")
}

// blackhole drops every packet through the downstream's end, each way, until unblackhole.
func (l *link) blackhole() error {
	return exec.Command("ip", "netns", "exec", l.far, "nft", "add table inet hole; "+
		`add chain inet hole in { type filter hook input priority -1; policy accept; iifname "vfar" drop; }; `+
		`add chain inet hole out { type filter hook output priority -1; policy accept; oifname "vfar" drop; }`).Run()
}

func (l *link) unblackhole() error {
	return exec.Command("ip", "netns", "exec", l.far, "nft", "delete", "table", "inet", "hole").Run()
}

// faults are what drop applies to the downstream's end of a link.
var faults = map[string]string{
	// 30 % of the packets each way, at random.
	"loss": `chain in { type filter hook input priority -2; policy accept; iifname "vfar" numgen random mod 100 < 30 drop; }
	chain out { type filter hook output priority -2; policy accept; oifname "vfar" numgen random mod 100 < 30 drop; }`,
	// Requests arrive, answers never leave (nor do handshakes complete for new connections).
	"answers-lost": `chain out { type filter hook output priority -2; policy accept; oifname "vfar" drop; }`,
	// Nothing arrives; what the downstream sends still leaves.
	"requests-lost": `chain in { type filter hook input priority -2; policy accept; iifname "vfar" drop; }`,
	// Nothing either way.
	"blackhole": `chain in { type filter hook input priority -2; policy accept; iifname "vfar" drop; }
	chain out { type filter hook output priority -2; policy accept; oifname "vfar" drop; }`,
}

// drop applies faults[kind] to the downstream's end until undrop.
func (l *link) drop(kind string) error {
	rules, ok := faults[kind]
	if !ok {
		return fmt.Errorf("no fault %q", kind)
	}
	cmd := exec.Command("ip", "netns", "exec", l.far, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader("table inet phase {\n\t" + rules + "\n}\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft %s: %v: %s", kind, err, out)
	}
	return nil
}

// undrop removes what drop applied.
func (l *link) undrop() error {
	return exec.Command("ip", "netns", "exec", l.far, "nft", "delete", "table", "inet", "phase").Run()
}

// in runs fn on an OS thread that has joined namespace ns; sockets fn makes belong to ns for
// their whole life. The thread is never handed back to the Go scheduler (it ends with the
// goroutine), so no other goroutine ever runs in ns by accident.
func in(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: the thread exits with this goroutine
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// dialFrom dials from namespace ns.
func dialFrom(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := in(ns, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// listenIn listens on addr in namespace ns.
func listenIn(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := in(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("listen in %s: %v", ns, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// longEnv selects the long run: every run's default length becomes its long one.
const longEnv = "IDEMGATE_NETFAULT_LONG"

// netfaultSeconds is how long a run's fault lasts: env when set, else short seconds (CI's
// run), or long ones when IDEMGATE_NETFAULT_LONG is set.
func netfaultSeconds(t *testing.T, env string, short, long int) int {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: a number of seconds", env, v)
		}
		return n
	}
	if os.Getenv(longEnv) != "" {
		return long
	}
	return short
}
