package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The multi-host harness gives each simulated machine its own address.
// With root and iproute2 every host is a network namespace whose eth0 is
// one end of a veth pair; the other ends are ports of one bridge in the
// root namespace, which itself holds the subnet's .1, so the test process
// reaches every host and traffic never leaves this machine. The subnet is
// in the RFC 2544 benchmarking range (198.18.0.0/15), never a real
// network's. Without namespaces it falls back to distinct loopback
// addresses (Linux routes all of 127/8 to lo), where a host cannot be cut
// off: the partition scenarios skip and say so.
//
// Every name carries the owning test process's pid, so a crashed run's
// leftovers are recognised (their pid is gone) and removed at the next
// start, and two runs at once (two worktrees' CI) never touch each other's.
const (
	nsPrefix   = "berth-e2e-" // namespaces: berth-e2e-<pid hex>-<host>
	linkPrefix = "be2e"       // links: be2e<pid hex>-<n> (15 bytes at most)
)

// hostNet is the test's set of hosts.
type hostNet struct {
	// t is the test failures are reported to; root owns what outlives a
	// subtest (namespaces, processes, logs).
	t, root *testing.T
	// netns is true with real namespaces, false in the loopback fallback.
	netns bool
	// why says why the fallback was taken.
	why    string
	owner  string // pid in hex
	subnet string // "198.18.N" with namespaces
	bridge string
	hosts  []*netHost
}

// netHost is one simulated machine.
type netHost struct {
	name string
	addr string
	ns   string // "" in the loopback fallback
	port string // the root-side veth: the host's link to the bridge
	cut  bool
}

// newHostNet makes the bridge, or decides on the loopback fallback when
// namespaces cannot be made here (not root, no ip, no permission): it
// finds out by trying. BERTH_E2E_NO_NETNS=1 forces the fallback.
func newHostNet(t *testing.T) *hostNet {
	t.Helper()
	n := &hostNet{t: t, root: t, owner: strconv.FormatInt(int64(os.Getpid()), 16)}
	if os.Getenv("BERTH_E2E_NO_NETNS") == "1" {
		n.why = "BERTH_E2E_NO_NETNS=1"
		return n
	}
	if _, err := exec.LookPath("ip"); err != nil {
		n.why = "no ip command (Debian: iproute2)"
		return n
	}
	// Two runs at once (two worktrees' CI) must not pick the same subnet:
	// choosing it and taking it (the bridge's address) is done under a lock.
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "berth-e2e-netns.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("netns lock: %v", err)
	}
	defer lock.Close() // closing releases the lock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("netns lock: %v", err)
	}
	removeStaleNetns(t)
	subnet, err := freeSubnet()
	if err != nil {
		n.why = err.Error()
		return n
	}
	// A namespace first: containers may allow links but not namespaces.
	probe := nsPrefix + n.owner + "-probe"
	if out, err := ipCmd("netns", "add", probe); err != nil {
		n.why = fmt.Sprintf("cannot make a network namespace (%v: %s)", err, out)
		return n
	}
	if out, err := ipCmd("netns", "del", probe); err != nil {
		t.Fatalf("remove probe namespace %s: %v: %s", probe, err, out)
	}
	n.bridge = linkPrefix + n.owner + "-br"
	if out, err := ipCmd("link", "add", n.bridge, "type", "bridge"); err != nil {
		n.why = fmt.Sprintf("cannot make a bridge (%v: %s)", err, out)
		return n
	}
	t.Cleanup(func() {
		if out, err := ipCmd("link", "del", n.bridge); err != nil {
			t.Errorf("remove bridge %s: %v: %s", n.bridge, err, out)
		}
	})
	n.subnet = subnet
	for _, args := range [][]string{
		{"addr", "add", subnet + ".1/24", "dev", n.bridge},
		{"link", "set", n.bridge, "up"},
	} {
		if out, err := ipCmd(args...); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	n.netns = true
	return n
}

// addHost makes the next host: namespace, veth pair on the bridge,
// address .11, .12, ... (127.0.0.11, ... in the fallback).
func (n *hostNet) addHost(name string) *netHost {
	n.t.Helper()
	idx := len(n.hosts) + 11
	if idx > 250 {
		n.t.Fatal("too many hosts")
	}
	h := &netHost{name: name}
	n.hosts = append(n.hosts, h)
	if !n.netns {
		h.addr = fmt.Sprintf("127.0.0.%d", idx)
		return h
	}
	h.addr = fmt.Sprintf("%s.%d", n.subnet, idx)
	h.ns = fmt.Sprintf("%s%s-%s", nsPrefix, n.owner, name)
	h.port = fmt.Sprintf("%s%s-%d", linkPrefix, n.owner, idx)
	inner := h.port + "i"
	if out, err := ipCmd("netns", "add", h.ns); err != nil {
		n.t.Fatalf("ip netns add %s: %v: %s", h.ns, err, out)
	}
	// Deleting the namespace deletes its end of the pair and so the pair.
	n.root.Cleanup(func() {
		if out, err := ipCmd("netns", "del", h.ns); err != nil {
			n.t.Errorf("remove namespace %s: %v: %s", h.ns, err, out)
		}
	})
	for _, args := range [][]string{
		{"link", "add", h.port, "type", "veth", "peer", "name", inner},
		{"link", "set", inner, "netns", h.ns},
		{"-n", h.ns, "link", "set", inner, "name", "eth0"},
		{"-n", h.ns, "addr", "add", h.addr + "/24", "dev", "eth0"},
		{"-n", h.ns, "link", "set", "eth0", "up"},
		{"-n", h.ns, "link", "set", "lo", "up"},
		{"link", "set", h.port, "master", n.bridge},
		{"link", "set", h.port, "up"},
	} {
		if out, err := ipCmd(args...); err != nil {
			n.t.Fatalf("host %s: ip %s: %v: %s", name, strings.Join(args, " "), err, out)
		}
	}
	return h
}

// cutOff takes the host's link down at both ends: nothing reaches it and
// nothing leaves it, while its processes run on.
func (n *hostNet) cutOff(h *netHost) {
	n.t.Helper()
	n.setLink(h, "down")
	h.cut = true
}

// heal brings the host's link back up.
func (n *hostNet) heal(h *netHost) {
	n.t.Helper()
	n.setLink(h, "up")
	h.cut = false
}

func (n *hostNet) setLink(h *netHost, state string) {
	n.t.Helper()
	if !n.netns {
		n.t.Fatalf("cannot cut %s off without network namespaces", h.name)
	}
	for _, args := range [][]string{
		{"link", "set", h.port, state},
		{"-n", h.ns, "link", "set", "eth0", state},
	} {
		if out, err := ipCmd(args...); err != nil {
			n.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}

// skipWithoutNetns skips a partition scenario in the loopback fallback.
func (n *hostNet) skipWithoutNetns(t *testing.T) {
	t.Helper()
	if !n.netns {
		t.Skipf("partition scenario skipped: no network namespaces (%s); hosts run on distinct 127.0.0.x addresses, which cannot be cut off", n.why)
	}
}

func ipCmd(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// freeSubnet picks the first 198.18.N.0/24 no interface here has an
// address in: 198.18.0.0/24 unless another run holds it.
func freeSubnet() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("list addresses: %w", err)
	}
	used := map[string]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			ip := ipn.IP.To4()
			used[fmt.Sprintf("%d.%d.%d", ip[0], ip[1], ip[2])] = true
		}
	}
	for i := 0; i < 256; i++ {
		if s := fmt.Sprintf("198.18.%d", i); !used[s] {
			return s, nil
		}
	}
	return "", fmt.Errorf("every 198.18.N.0/24 is in use")
}

// removeStaleNetns deletes namespaces and links a crashed earlier run left
// behind: those whose owner pid no longer runs.
func removeStaleNetns(t *testing.T) {
	if out, err := ipCmd("netns", "list"); err == nil {
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
				continue
			}
			owner, _, _ := strings.Cut(strings.TrimPrefix(f[0], nsPrefix), "-")
			if ownerGone(owner) {
				killNetnsProcs(f[0])
				if out, err := ipCmd("netns", "del", f[0]); err != nil {
					t.Logf("remove stale namespace %s: %v: %s", f[0], err, out)
				} else {
					t.Logf("removed stale namespace %s", f[0])
				}
			}
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if !strings.HasPrefix(i.Name, linkPrefix) {
			continue
		}
		owner, _, _ := strings.Cut(strings.TrimPrefix(i.Name, linkPrefix), "-")
		if ownerGone(owner) {
			if out, err := ipCmd("link", "del", i.Name); err != nil {
				t.Logf("remove stale link %s: %v: %s", i.Name, err, out)
			} else {
				t.Logf("removed stale link %s", i.Name)
			}
		}
	}
}

// ownerGone says whether the run that owns a name (its pid in hex) ended.
func ownerGone(hexPID string) bool {
	pid, err := strconv.ParseInt(hexPID, 16, 32)
	if err != nil || pid <= 0 {
		return false // not one of ours
	}
	return syscall.Kill(int(pid), 0) == syscall.ESRCH
}

// killNetnsProcs kills what a crashed run left running in a namespace.
func killNetnsProcs(ns string) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// hostProc is one process running on a host, in its own process group so
// that everything it started dies with it.
type hostProc struct {
	name string
	host *netHost
	args []string
	env  []string
	cmd  *exec.Cmd
	log  string
	done chan error
}

// start runs berth with args on host h (ip netns exec execs in place, so
// the pid is berth's own). The process is stopped at cleanup.
func (n *hostNet) start(h *netHost, name string, env []string, args ...string) *hostProc {
	n.t.Helper()
	p := &hostProc{name: name, host: h, args: args, env: env,
		log: filepath.Join(n.root.TempDir(), name+".log")}
	n.run(p)
	root := n.root
	root.Cleanup(func() {
		p.stop(root, 20*time.Second)
		if root.Failed() {
			root.Logf("---- last lines of %s on %s ----\n%s", p.name, h.name, tail(p.log, 40))
		}
	})
	return p
}

// restart starts a stopped process again with the same command.
func (n *hostNet) restart(p *hostProc) {
	n.t.Helper()
	if p.running() {
		n.t.Fatalf("restart %s: still running", p.name)
	}
	n.run(p)
}

func (n *hostNet) run(p *hostProc) {
	n.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	argv := append([]string{berthBin}, p.args...)
	if p.host.ns != "" {
		argv = append([]string{"ip", "netns", "exec", p.host.ns}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), p.env...)
	// Its own group, so a kill reaches all it started; and killed with
	// the test process, so a test binary that dies (a -timeout panic runs
	// no cleanup) leaves no host running. ip netns exec execs in place, so
	// the death signal reaches berth itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		n.t.Fatalf("start %s on %s: %v", p.name, p.host.name, err)
	}
	p.cmd, p.done = cmd, make(chan error, 1)
	go func() { p.done <- cmd.Wait(); f.Close() }()
}

func (p *hostProc) pid() int { return p.cmd.Process.Pid }

func (p *hostProc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case err := <-p.done:
		p.done <- err
		return false
	default:
		return true
	}
}

// kill is losing the process: SIGKILL to its group, no shutdown.
func (p *hostProc) kill(t *testing.T) {
	t.Helper()
	if !p.running() {
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	err := <-p.done
	p.done <- err
}

// stop sends SIGTERM to the group and waits; past the timeout it kills.
func (p *hostProc) stop(t *testing.T, timeout time.Duration) {
	if !p.running() {
		return
	}
	if p.host.cut {
		// Cut off, it cannot hand back leases: do not wait for it.
		p.kill(t)
		return
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(timeout):
		t.Errorf("%s on %s did not stop within %s after SIGTERM", p.name, p.host.name, timeout)
		p.kill(t)
	}
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := bytes.Split(b, []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
