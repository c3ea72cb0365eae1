package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func etcdBlock(url string) string {
	return fmt.Sprintf("etcd {\n  endpoints = [%q]\n  prefix = \"/berth\"\n}\nlog {\n  level = \"debug\"\n}\n", url)
}

// TestMultiProcessBootAndDelete runs berth server, berth conductor and three
// berth agents as separate processes against one etcd, creates servers
// through the CLI, waits for ACTIVE, deletes them and checks that no
// allocation is left behind.
func TestMultiProcessBootAndDelete(t *testing.T) {
	c := newCluster(t)
	c.startConductor("conductor", "cell1", nil)
	c.startServer("server", allRoles, nil)
	// startAgents waits until the API reports every host up.
	c.startAgents(agentSpec{host: "compute-1", memoryMB: 16384},
		agentSpec{host: "compute-2", memoryMB: 16384}, agentSpec{host: "compute-3", memoryMB: 16384})
	apiURL, cli, keys := c.apiURL, c.cli, c.keys

	out, err := runCLI(t, apiURL, "server", "create", "--flavor", "m1.small", "--count", "5", "--name", "web", "--wait", "--timeout", "60s")
	if err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	if n := countByStatus(out)["ACTIVE"]; n != 5 {
		t.Fatalf("want 5 ACTIVE servers, got %d:\n%s", n, out)
	}
	// Each host has room for several m1.small, but the RAM weigher spreads:
	// five servers over three hosts use every host.
	for i := 1; i <= 3; i++ {
		if !strings.Contains(out, fmt.Sprintf("compute-%d", i)) {
			t.Errorf("no server on compute-%d; the weighers should spread:\n%s", i, out)
		}
	}

	list, err := runCLI(t, apiURL, "server", "list")
	if err != nil {
		t.Fatalf("list: %v\n%s", err, list)
	}
	if c := countByStatus(list); c["ACTIVE"] != 5 {
		t.Fatalf("list shows %v, want 5 ACTIVE:\n%s", c, list)
	}
	var ids []string
	for _, line := range strings.Split(list, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			ids = append(ids, f[0])
		}
	}
	show, err := runCLI(t, apiURL, "server", "show", ids[0])
	if err != nil || !strings.Contains(show, "ACTIVE") || !strings.Contains(show, "m1.small") {
		t.Fatalf("show: %v\n%s", err, show)
	}

	// A flavor no host can hold ends in ERROR with the scheduler's reason.
	out, _ = runCLI(t, apiURL, "server", "create", "--flavor", "m1.xlarge", "--count", "7", "--name", "big", "--wait", "--timeout", "60s")
	if countByStatus(out)["ERROR"] != 7 || !strings.Contains(out, "No valid host") {
		t.Fatalf("want 7 servers in ERROR with 'No valid host':\n%s", out)
	}

	list, _ = runCLI(t, apiURL, "server", "list")
	ids = ids[:0]
	for _, line := range strings.Split(list, "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			ids = append(ids, f[0])
		}
	}
	args := append([]string{"server", "delete", "--wait", "--timeout", "60s"}, ids...)
	if out, err := runCLI(t, apiURL, args...); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	list, _ = runCLI(t, apiURL, "server", "list")
	if c := countByStatus(list); len(c) != 0 {
		t.Fatalf("servers left after delete: %v\n%s", c, list)
	}
	if left := leftovers(t, cli, keys); len(left) > 0 {
		t.Fatalf("allocations left behind after deleting every server: %v", left)
	}
}

func runCLI(t *testing.T, apiURL string, args ...string) (string, error) {
	t.Helper()
	return cli(t, apiURL, args...)
}

// TestCreateOnRequestedHost pins servers to a host, as Nova's host on
// create, through the CLI, the API, the superconductor and the scheduler
// in separate processes: each lands on the host it named, never on the
// other two, and a host that does not exist is refused at the API.
func TestCreateOnRequestedHost(t *testing.T) {
	c := newCluster(t)
	c.startConductor("conductor", "cell1", nil)
	c.startServer("server", allRoles, nil)
	c.startAgents(agentSpec{host: "compute-1", memoryMB: 16384},
		agentSpec{host: "compute-2", memoryMB: 16384}, agentSpec{host: "compute-3", memoryMB: 16384})
	for _, host := range []string{"compute-2", "compute-2", "compute-3"} {
		out := c.cliOK("server", "create", "--flavor", "m1.tiny", "--name", "pinned", "--host", host, "--wait", "--timeout", "60s")
		if !strings.Contains(out, "ACTIVE") {
			t.Fatalf("server pinned to %s did not go ACTIVE:\n%s", host, out)
		}
		servers, err := c.api.ListServers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		newest := servers[0]
		for _, s := range servers {
			if s.Created.After(newest.Created) {
				newest = s
			}
		}
		if newest.Host != host {
			t.Fatalf("server pinned to %s built on %q", host, newest.Host)
		}
	}
	out, err := cli(t, c.apiURL, "server", "create", "--flavor", "m1.tiny", "--name", "nowhere", "--host", "compute-9")
	if err == nil || !strings.Contains(out, "Compute host compute-9 could not be found.") {
		t.Fatalf("create on an unknown host: err %v, printed:\n%s", err, out)
	}
}
