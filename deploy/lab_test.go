package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/testwait"
)

// labLoopback replaces the lab's private network: the same three machines,
// roles and fixed ports, on loopback addresses of their own (all of
// 127.0.0.0/8 is loopback on Linux). 127.42/16 keeps clear of the
// 127.0.0.x other tests use.
var labLoopback = map[string]string{"node1": "127.42.0.11", "node2": "127.42.0.12", "node3": "127.42.0.13"}

// unitProc is one role of one machine, started as its installed unit says.
type unitProc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

// TestLabFromInstalledUnits is `vagrant up` without VMs: install.sh installs
// each lab machine into its own tree, then every installed unit's ExecStart
// runs (binary and config taken from the tree) in systemd's order, and the
// lab must work: three etcd members form a cluster, both servers answer,
// the agents of both cells register, servers built by the process driver
// are real processes, deleting them ends those, and every role stops within
// its unit's TimeoutStopSec on SIGTERM.
func TestLabFromInstalledUnits(t *testing.T) {
	nodes, vars := readLab(t)
	for i := range nodes {
		addr, ok := labLoopback[nodes[i].Name]
		if !ok {
			t.Fatalf("no loopback address for lab machine %s", nodes[i].Name)
		}
		nodes[i].Address = addr
	}
	// provider_sync_interval: an agent that registered before its cell's
	// conductor created the cell maps itself at the next sync.
	vars = append(vars, "provider_sync_interval=2s")

	roots := map[string]string{}
	for _, n := range nodes {
		root := t.TempDir()
		roots[n.Name] = root
		// Plain HTTP: the units run from the tree, and a config names its
		// certificates by their path on the machine (/etc/berth/tls),
		// which is not in the tree. TLS as deployed is run by the e2e
		// TestMultiHost, from the same templates.
		args := labArgs(n, nodes, vars, root, "")
		// The roles' state goes inside the tree too: nothing under /var.
		args = append(args, "--data-dir", filepath.Join(root, "var/lib/berth"))
		mustInstall(t, args...)
	}

	logs := t.TempDir() // before the Cleanup below, so the logs outlive stopUnits
	var procs []*unitProc
	t.Cleanup(func() { stopUnits(t, procs, roots) })
	// systemd's order: etcd members, then what is After=berth-etcd.service.
	for _, role := range allRoles {
		for _, n := range nodes {
			if slices.Contains(n.Roles, role) {
				procs = append(procs, startUnit(t, logs, roots[n.Name], n.Name, role))
			}
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The servers' APIs check identity tokens (auth = "keystone"), /v1
	// included: log in as the admin install.sh made, at the first
	// server's identity API once it answers.
	var servers []*api.Client
	var token, password, authURL string
	for _, n := range nodes {
		if !slices.Contains(n.Roles, configs.RoleServer) {
			continue
		}
		if token == "" {
			password = strings.TrimSpace(readFile(t, filepath.Join(roots[n.Name], "etc/berth/identity-admin-password")))
			authURL = "http://" + n.Address + ":5000/v3"
			waitFor(t, ctx, procs, "the admin's token from "+n.Name, func() (bool, string) {
				var err error
				token, err = identity.Login(ctx, nil, authURL, "admin", password, "admin")
				return err == nil, fmt.Sprint(err)
			})
		}
		c := api.NewClient("http://" + n.Address + ":8774")
		c.Token = token
		servers = append(servers, c)
	}
	if len(servers) != 2 {
		t.Fatalf("the lab has %d servers, want 2", len(servers))
	}

	// Every agent registered, mapped to its cell and up, seen by both APIs.
	for _, c := range servers {
		waitFor(t, ctx, procs, "3 hosts up and mapped via "+c.BaseURL, func() (bool, string) {
			hosts, err := c.ListHosts(ctx)
			if err != nil {
				return false, err.Error()
			}
			var ready []string
			for _, h := range hosts {
				if h.State == "up" && h.Mapped && h.Provider != "" {
					ready = append(ready, h.Host+"@"+h.Cell)
				}
			}
			slices.Sort(ready)
			return slices.Equal(ready, []string{"node1@cell1", "node2@cell1", "node3@cell2"}), fmt.Sprint(hosts)
		})
	}

	// Create through the second server with the CLI, logged in as the
	// README's openrc does (OS_* variables; the lab's APIs want a token),
	// wait until every server has settled, and read them through the first.
	create := exec.CommandContext(ctx, berthBin, "server", "create", "--api", servers[1].BaseURL,
		"--name", "lab", "--flavor", "m1.tiny", "--count", "6", "--wait")
	create.Env = append(os.Environ(), "OS_AUTH_URL="+authURL, "OS_USERNAME=admin",
		"OS_PASSWORD="+password, "OS_PROJECT_NAME=admin", "OS_USER_DOMAIN_NAME=Default", "OS_PROJECT_DOMAIN_NAME=Default")
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("berth server create: %v\n%s", err, out)
	}
	var list []api.ServerView
	waitFor(t, ctx, procs, "6 servers built", func() (bool, string) {
		var err error
		if list, err = servers[0].ListServers(ctx); err != nil {
			return false, err.Error()
		}
		built := 0
		for _, s := range list {
			if s.Status == "ACTIVE" || s.Status == "ERROR" {
				built++
			}
		}
		return built == 6, fmt.Sprintf("%d of %d servers ACTIVE or ERROR", built, len(list))
	})
	used := map[string]int{}
	for _, s := range list {
		if s.Status != "ACTIVE" {
			t.Errorf("server %s is %s on %s (fault %+v), want ACTIVE", s.ID, s.Status, s.Host, s.Fault)
		}
		used[s.Host]++
	}
	if len(list) != 6 || len(used) < 2 {
		t.Fatalf("%d servers on hosts %v; want 6 spread over at least 2 hosts", len(list), used)
	}
	t.Logf("6 servers ACTIVE, per host: %v", used)

	// Each ACTIVE server is a running `sleep infinity` on its host.
	for _, n := range nodes {
		recs := instanceRecords(t, roots[n.Name])
		if len(recs) != used[n.Name] {
			t.Errorf("%s: %d instance processes recorded, the API says %d servers", n.Name, len(recs), used[n.Name])
		}
		for _, r := range recs {
			if syscall.Kill(r.PID, 0) != nil {
				t.Errorf("%s: instance %s's process %d is not running", n.Name, r.UUID, r.PID)
			}
			if r.Command != "sleep infinity" {
				t.Errorf("%s: instance %s runs %q, the lab runs sleep infinity", n.Name, r.UUID, r.Command)
			}
		}
	}

	for _, s := range list {
		if err := servers[0].DeleteServer(ctx, s.ID); err != nil {
			t.Fatalf("delete %s: %v", s.ID, err)
		}
	}
	waitFor(t, ctx, procs, "every server deleted and its process gone", func() (bool, string) {
		list, err := servers[1].ListServers(ctx)
		if err != nil {
			return false, err.Error()
		}
		left := 0
		for _, n := range nodes {
			left += len(instanceRecords(t, roots[n.Name]))
		}
		return len(list) == 0 && left == 0, fmt.Sprintf("%d servers listed, %d instance processes recorded", len(list), left)
	})
}

// startUnit runs role's installed unit of machine name: its ExecStart with
// the binary and config from the tree.
func startUnit(t *testing.T, logs, root, name, role string) *unitProc {
	t.Helper()
	u := parseUnit(t, filepath.Join(root, "etc/systemd/system/berth-"+role+".service"))
	argv := strings.Fields(u.one("Service.ExecStart"))
	if len(argv) != 5 || argv[1] != "run" || argv[3] != "-config" {
		t.Fatalf("berth-%s.service: ExecStart %q", role, u.one("Service.ExecStart"))
	}
	log := filepath.Join(logs, name+"-"+role+".log")
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, argv[0]), argv[1], argv[2], argv[3], filepath.Join(root, argv[4]))
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s on %s: %v", role, name, err)
	}
	p := &unitProc{name: name + "/" + role, cmd: cmd, log: log, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	return p
}

// waitFor polls cond until it holds or ctx ends; a role exiting
// meanwhile fails at once with its log.
func waitFor(t *testing.T, ctx context.Context, procs []*unitProc, what string, cond func() (bool, string)) {
	t.Helper()
	timeout := testwait.Timeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	err := testwait.Wait(ctx, timeout, func() (bool, string) {
		ok, state := cond()
		if ok {
			return true, ""
		}
		for _, p := range procs {
			select {
			case err := <-p.done:
				p.done <- err
				t.Fatalf("%s exited (%v) while waiting for %s:\n%s", p.name, err, what, tail(p.log))
			default:
			}
		}
		return false, state
	})
	if err != nil {
		for _, p := range procs {
			t.Logf("%s:\n%s", p.name, tail(p.log))
		}
		t.Fatalf("timed out waiting for %s; %v", what, err)
	}
}

// stopUnits stops the roles as systemd would (SIGTERM, then SIGKILL after
// TimeoutStopSec), agents first and etcd last, and ends any instance
// process left (KillMode=process leaves them running by design).
func stopUnits(t *testing.T, procs []*unitProc, roots map[string]string) {
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		start := time.Now()
		select {
		case <-p.done:
			t.Logf("%s stopped in %v", p.name, time.Since(start).Round(time.Millisecond))
		case <-time.After(60 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("%s did not stop within TimeoutStopSec (60s) of SIGTERM:\n%s", p.name, tail(p.log))
		}
	}
	for _, root := range roots {
		for _, r := range instanceRecords(t, root) {
			_ = syscall.Kill(-r.PID, syscall.SIGKILL)
		}
	}
}

// instanceRecord is the process driver's record of a running instance
// (agent/driver_process.go procState), kept under the state dir in its
// host's own directory.
type instanceRecord struct {
	UUID    string `json:"uuid"`
	PID     int    `json:"pid"`
	Command string `json:"command"`
}

func instanceRecords(t *testing.T, root string) []instanceRecord {
	files, err := filepath.Glob(filepath.Join(root, "var/lib/berth/process/*/*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []instanceRecord
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // removed as the instance ended
		}
		var r instanceRecord
		if err := json.Unmarshal(b, &r); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		out = append(out, r)
	}
	return out
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
