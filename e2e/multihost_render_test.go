package e2e

import (
	"fmt"
	"sort"
	"strings"
)

// deployVars are what an operator passes to `berth config render`.
type deployVars struct {
	Role, Name, Address, Cell, DataDir string
	Etcd                               map[string]string // member name -> IP
	Vars                               map[string]string
}

// renderDeploy: TEMPORARY until configs.RenderDeploy lands on main.
func renderDeploy(v deployVars) ([]byte, error) {
	var names []string
	for n := range v.Etcd {
		names = append(names, n)
	}
	sort.Strings(names)
	var eps, peers []string
	for _, n := range names {
		eps = append(eps, fmt.Sprintf("%q", "http://"+v.Etcd[n]+":2379"))
		peers = append(peers, n+"=http://"+v.Etcd[n]+":2380")
	}
	g := func(k string) string { return v.Vars[k] }
	var b strings.Builder
	fmt.Fprintf(&b, "log {\n  level = %q\n}\n", g("log_level"))
	switch v.Role {
	case "etcd":
		fmt.Fprintf(&b, `etcd {
  prefix = "/berth"
  embedded {
    name = %q
    data_dir = %q
    client_url = "http://%s:2379"
    peer_url = "http://%s:2380"
    initial_cluster = %q
    initial_cluster_state = "new"
  }
}
`, v.Name, v.DataDir, v.Address, v.Address, strings.Join(peers, ","))
		return []byte(b.String()), nil
	}
	fmt.Fprintf(&b, "etcd {\n  prefix = \"/berth\"\n  endpoints = [%s]\n}\n", strings.Join(eps, ", "))
	switch v.Role {
	case "server":
		fmt.Fprintf(&b, `api { bind = "%[1]s:8774" }
placement { bind = "%[1]s:8778" }
scheduler {
  bind = "%[1]s:8790"
  election_ttl = %[2]q
  leader_interval = %[3]q
  down_host_grace = %[4]q
}
superconductor { lease_ttl = %[5]q }
`, v.Address, g("election_ttl"), g("leader_interval"), g("down_host_grace"), g("superconductor_lease_ttl"))
	case "conductor":
		fmt.Fprintf(&b, "conductor {\n  cell = %q\n  lease_ttl = %q\n}\n", v.Cell, g("conductor_lease_ttl"))
	case "agent":
		fail := g("fail")
		if fail == "" {
			fail = "false"
		}
		fmt.Fprintf(&b, `agent {
  host = %q
  cell = %q
  driver = "fake"
  report_interval = %q
  service_down_time = %q
  inventory {
    vcpus = %s
    memory_mb = %s
    disk_gb = 2000
    reserved_host_memory_mb = 512
  }
  fake {
    build_time = %q
    fail = %s
  }
}
`, v.Name, v.Cell, g("report_interval"), g("service_down_time"), g("vcpus"), g("memory_mb"), g("build_time"), fail)
	}
	return []byte(b.String()), nil
}
