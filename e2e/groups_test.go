package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// serverHosts parses `berth server list` into name -> host for ACTIVE servers.
func serverHosts(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 4 && f[2] == "ACTIVE" {
			m[f[1]] = f[3]
		}
	}
	return m
}

// TestServerGroupsAndZonesThroughTheCLI drives anti-affinity groups and
// availability zones through `berth dev` and the CLI: members spread one a
// host, one member too many is refused with the filter's count, a deleted
// member frees its host, and a zone's aggregate steers a server to its host.
func TestServerGroupsAndZonesThroughTheCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	apiAddr := freeAddr(t)
	apiURL := "http://" + apiAddr
	startProc(t, "dev", "dev", "-data-dir", t.TempDir(),
		"-etcd", freeAddr(t),
		"-etcd-peer", freeAddr(t),
		"-api", apiAddr, "-placement", freeAddr(t),
		"-identity", freeAddr(t),
		"-image", freeAddr(t),
		"-hosts", "4", "-cells", "2")
	waitHTTP(t, apiURL+"/healthz")
	waitHostsUp(t, apiURL, 4)
	run := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, apiURL, args...)
		if err != nil {
			t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	group := strings.TrimSpace(run("server-group", "create", "web", "--policy", "anti-affinity", "-o", "value", "-c", "id"))
	run("server", "create", "--flavor", "m1.tiny", "--count", "4", "--name", "web", "--hint", "group="+group, "--wait")
	hosts := serverHosts(run("server", "list"))
	seen := map[string]bool{}
	for _, h := range hosts {
		seen[h] = true
	}
	if len(hosts) != 4 || len(seen) != 4 {
		t.Fatalf("group members on %v, want four hosts", hosts)
	}
	out, err := runCLI(t, apiURL, "server", "create", "--flavor", "m1.tiny", "--name", "extra", "--hint", "group="+group, "--wait")
	if err == nil || !strings.Contains(out, "ServerGroupAntiAffinityFilter removed 4") {
		t.Fatalf("a fifth member must be refused by the filter; got %v:\n%s", err, out)
	}
	// Free web-2's host and boot a member again: it goes there.
	var web2ID string
	for _, line := range strings.Split(run("server", "list"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[1] == "web-2" {
			web2ID = f[0]
		}
	}
	run("server", "delete", web2ID, "--wait")
	run("server", "create", "--flavor", "m1.tiny", "--name", "again", "--hint", "group="+group, "--wait")
	if got := serverHosts(run("server", "list"))["again"]; got != hosts["web-2"] {
		t.Fatalf("new member on %s, want the freed host %s", got, hosts["web-2"])
	}
	// The deleted member left the group; the refused one stays a member
	// (it exists, in ERROR), as in Nova.
	if members := strings.Split(strings.TrimSpace(run("server-group", "show", "web", "-o", "value", "-c", "members")), ","); len(members) != 5 {
		t.Fatalf("group members %q, want web-1, web-3, web-4, extra and again", members)
	}

	run("aggregate", "create", "east", "--az", "az-east")
	run("aggregate", "add-host", "east", "compute-3")
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("east-%d", i)
		run("server", "create", "--flavor", "m1.tiny", "--name", name, "--az", "az-east", "--wait")
		if got := serverHosts(run("server", "list"))[name]; got != "compute-3" {
			t.Fatalf("%s in az-east landed on %s, want compute-3", name, got)
		}
	}
	if out, err := runCLI(t, apiURL, "server", "create", "--flavor", "m1.tiny", "--az", "nowhere"); err == nil {
		t.Fatalf("an unknown zone was accepted:\n%s", out)
	}
}
