package configs

import (
	"strings"
	"testing"
)

func labVars(name, addr, cell string) DeployVars {
	return DeployVars{
		Name: name, Address: addr, Cell: cell, DataDir: "/var/lib/berth", AdminPasswordHash: testHash,
		Etcd: []EtcdMember{{"node1", "192.0.2.11"}, {"node2", "192.0.2.12"}, {"node3", "192.0.2.13"}},
	}
}

// TestRenderDeployEveryRole renders each role for a lab machine and checks
// the decoded config says what the machine's variables said.
func TestRenderDeployEveryRole(t *testing.T) {
	v := labVars("node2", "192.0.2.12", "cell1")
	v.Vars = map[string]string{"service_down_time": "5s", "report_interval": "1s", "election_ttl": "3s", "driver": "fake", "build_time": "1s", "vcpus": "8",
		"resource_provider_association_refresh": "10m"}
	for _, role := range DeployRoles {
		out, err := RenderDeploy(role, v)
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		cfg, err := Parse(out, role+".hcl")
		if err != nil {
			t.Fatalf("%s: rendered config does not parse: %v\n%s", role, err, out)
		}
		wantEndpoints := []string{"https://192.0.2.11:2379", "https://192.0.2.12:2379", "https://192.0.2.13:2379"}
		// TLS by default: every listener, member and etcd client with
		// the machine's certificate and the lab CA.
		if cfg.TLS == nil || cfg.TLS.CertFile != "/etc/berth/tls/node2.pem" || cfg.TLS.KeyFile != "/etc/berth/tls/node2-key.pem" ||
			cfg.TLS.CAFile != "/etc/berth/tls/ca.pem" {
			t.Errorf("%s tls = %+v", role, cfg.TLS)
		}
		if e := cfg.Etcd.TLS; e == nil || e.CertFile != "/etc/berth/tls/node2.pem" || e.CAFile != "/etc/berth/tls/ca.pem" {
			t.Errorf("%s etcd tls = %+v", role, e)
		}
		// Servers answer the status paths on their API ports; the other
		// roles, which may share a machine, each have their own port.
		wantStatus := map[string]string{RoleEtcd: "192.0.2.12:8791", RoleConductor: "192.0.2.12:8792",
			RoleAgent: "192.0.2.12:8793", RoleServer: ""}[role]
		if cfg.Status.Bind != wantStatus {
			t.Errorf("%s status bind = %q, want %q", role, cfg.Status.Bind, wantStatus)
		}
		switch role {
		case RoleEtcd:
			m := cfg.Etcd.Embedded
			if m == nil || m.Name != "node2" || m.ClientURL != "https://192.0.2.12:2379" || m.PeerURL != "https://192.0.2.12:2380" ||
				m.DataDir != "/var/lib/berth/etcd" || m.InitialClusterState != ClusterStateNew ||
				m.InitialCluster != "node1=https://192.0.2.11:2380,node2=https://192.0.2.12:2380,node3=https://192.0.2.13:2380" {
				t.Errorf("etcd member = %+v", m)
			}
		case RoleServer:
			if strings.Join(cfg.Etcd.Endpoints, " ") != strings.Join(wantEndpoints, " ") {
				t.Errorf("server endpoints = %v", cfg.Etcd.Endpoints)
			}
			if cfg.API.Bind != "192.0.2.12:8774" || cfg.Placement.Bind != "192.0.2.12:8778" ||
				cfg.Scheduler.Bind != "192.0.2.12:8775" || cfg.Scheduler.AdvertiseURL != "https://192.0.2.12:8775" ||
				cfg.Scheduler.ElectionTTL.String() != "3s" || cfg.Superconductor == nil {
				t.Errorf("server = api %+v placement %+v scheduler %+v", cfg.API, cfg.Placement, cfg.Scheduler)
			}
			// A deployment is never noauth: identity tokens, its admin
			// the hash given, its catalog this machine's APIs.
			id := cfg.Identity
			if cfg.API.Auth != AuthKeystone || cfg.Placement.Auth != AuthKeystone || id == nil ||
				id.Bind != "192.0.2.12:5000" || len(id.Users) != 1 || id.Users[0].PasswordHash != testHash ||
				id.PublicURL() != "https://192.0.2.12:5000/v3" || len(id.Endpoints) != 3 || id.Endpoints[0].Public != "https://192.0.2.12:8774/v2.1" {
				t.Errorf("server auth: api %q placement %q identity %+v", cfg.API.Auth, cfg.Placement.Auth, id)
			}
		case RoleConductor:
			if cfg.Conductor.Cell != "cell1" || len(cfg.Etcd.Endpoints) != 3 {
				t.Errorf("conductor = %+v, endpoints %v", cfg.Conductor, cfg.Etcd.Endpoints)
			}
		case RoleAgent:
			a := cfg.Agent
			if a.Host != "node2" || a.Cell != "cell1" || a.Driver != "fake" || a.ServiceDownTime.String() != "5s" ||
				a.Fake.BuildTime.String() != "1s" || a.Inventory.VCPUs != 8 || a.Process.StateDir != "/var/lib/berth/process" ||
				a.ProviderRefresh.String() != "10m0s" {
				t.Errorf("agent = %+v", a)
			}
		}
	}
}

func TestRenderDeploySingleMemberHasNoInitialCluster(t *testing.T) {
	v := DeployVars{Name: "solo", Address: "127.0.0.1", Etcd: []EtcdMember{{"solo", "127.0.0.1"}}}
	out, err := RenderDeploy(RoleEtcd, v)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "initial_cluster") {
		t.Errorf("a single member needs no initial_cluster:\n%s", out)
	}
}

func TestRenderDeployErrors(t *testing.T) {
	cases := []struct {
		desc string
		role string
		edit func(*DeployVars)
		want string
	}{
		{"unknown role", "database", func(*DeployVars) {}, `no template for role "database"`},
		{"unknown variable", RoleAgent, func(v *DeployVars) { v.Vars = map[string]string{"servce_down_time": "5s"} }, `unknown variable "servce_down_time"`},
		{"number variable with HCL in it", RoleAgent, func(v *DeployVars) { v.Vars = map[string]string{"vcpus": "4\n}\nscheduler {"} }, "not a valid int"},
		{"bad duration", RoleServer, func(v *DeployVars) { v.Vars = map[string]string{"election_ttl": "soon"} }, "not a valid duration"},
		{"port out of range", RoleConductor, func(v *DeployVars) { v.Vars = map[string]string{"status_port": "70000"} }, "not a valid port"},
		{"port not a number", RoleConductor, func(v *DeployVars) { v.Vars = map[string]string{"status_port": "88\"\n"} }, "not a valid port"},
		{"value the config refuses", RoleAgent, func(v *DeployVars) { v.Vars = map[string]string{"driver": "qemu"} }, "the result is not valid"},
		{"agent without cell", RoleAgent, func(v *DeployVars) { v.Cell = "" }, "needs a cell"},
		{"bad name", RoleAgent, func(v *DeployVars) { v.Name = "node/1" }, `name "node/1"`},
		{"etcd on a machine not a member", RoleEtcd, func(v *DeployVars) { v.Name = "node9" }, "not among the etcd members"},
		{"member address differs", RoleEtcd, func(v *DeployVars) { v.Address = "192.0.2.99" }, "but this machine's address is 192.0.2.99"},
		{"no members", RoleServer, func(v *DeployVars) { v.Etcd = nil }, "no etcd members"},
		{"server without an admin password hash", RoleServer, func(v *DeployVars) { v.AdminPasswordHash = "" }, "identity admin's password hash"},
		{"a password where its hash belongs", RoleServer, func(v *DeployVars) { v.AdminPasswordHash = "hunter2" }, "Invalid password_hash"},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			v := labVars("node1", "192.0.2.11", "cell1")
			c.edit(&v)
			_, err := RenderDeploy(c.role, v)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want it to contain %q", err, c.want)
			}
		})
	}
}

func TestHCLQuoteEscapesTemplates(t *testing.T) {
	v := labVars("node1", "192.0.2.11", "cell1")
	v.Vars = map[string]string{"process_command": `echo "${HOME}" %{ if true }x%{ endif }`}
	out, err := RenderDeploy(RoleAgent, v)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(out, "agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Agent.Process.Command; got != `echo "${HOME}" %{ if true }x%{ endif }` {
		t.Errorf("command = %q: HCL evaluated the value", got)
	}
}

func TestParseEtcdMembers(t *testing.T) {
	got, err := ParseEtcdMembers("a=10.0.0.1, b=10.0.0.2")
	if err != nil || len(got) != 2 || got[1] != (EtcdMember{"b", "10.0.0.2"}) {
		t.Fatalf("ParseEtcdMembers = %v, %v", got, err)
	}
	if _, err := ParseEtcdMembers("a=10.0.0.1,b"); err == nil || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("err = %v; want it to name the bad entry", err)
	}
}

// TestRenderDeployDefaultsMatchConfigDefaults keeps the templates' tunable
// defaults from drifting from defaults.go: a machine rendered with no -var
// must run with the same settings as a config file that leaves them out.
// TestRenderDeployStatusPort: two conductors (two cells) on one machine
// need two status ports; status_port moves the listener of any role that
// has one.
func TestRenderDeployStatusPort(t *testing.T) {
	v := labVars("node2", "192.0.2.12", "cell2")
	v.Vars = map[string]string{"status_port": "8794"}
	for _, role := range []string{RoleEtcd, RoleConductor, RoleAgent} {
		out, err := RenderDeploy(role, v)
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		cfg, err := Parse(out, role+".hcl")
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		if cfg.Status.Bind != "192.0.2.12:8794" {
			t.Errorf("%s status bind = %q, want 192.0.2.12:8794", role, cfg.Status.Bind)
		}
	}
}

func TestRenderDeployDefaultsMatchConfigDefaults(t *testing.T) {
	def := Defaults()
	v := labVars("node1", "192.0.2.11", "cell1")
	parse := func(role string) *Config {
		out, err := RenderDeploy(role, v)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := Parse(out, role+".hcl")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	srv := parse(RoleServer)
	type pair struct {
		name      string
		got, want any
	}
	checks := []pair{
		{"max_attempts", srv.Scheduler.MaxAttempts, def.Scheduler.MaxAttempts},
		{"election_ttl", srv.Scheduler.ElectionTTL, def.Scheduler.ElectionTTL},
		{"leader_interval", srv.Scheduler.LeaderInterval, def.Scheduler.LeaderInterval},
		{"down_host_grace", srv.Scheduler.DownHostGrace, def.Scheduler.DownHostGrace},
		{"orphan_grace", srv.Scheduler.OrphanGrace, def.Scheduler.OrphanGrace},
		{"superconductor_workers", srv.Superconductor.Workers, def.Superconductor.Workers},
		{"superconductor_lease_ttl", srv.Superconductor.LeaseTTL, def.Superconductor.LeaseTTL},
		{"select_timeout", srv.Superconductor.SelectTimeout, def.Superconductor.SelectTimeout},
		{"log_level", srv.Log.Level, def.Log.Level},
		{"etcd_prefix", srv.Etcd.Prefix, def.Etcd.Prefix},
	}
	cond := parse(RoleConductor)
	checks = append(checks,
		pair{"conductor_workers", cond.Conductor.Workers, def.Conductor.Workers},
		pair{"conductor_lease_ttl", cond.Conductor.LeaseTTL, def.Conductor.LeaseTTL})
	ag := parse(RoleAgent).Agent
	fileDefaults, err := Parse([]byte("agent {\n  host = \"h\"\n  cell = \"c\"\n}\n"), "agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	da := fileDefaults.Agent
	checks = append(checks,
		pair{"report_interval", ag.ReportInterval, da.ReportInterval},
		pair{"service_down_time", ag.ServiceDownTime, da.ServiceDownTime},
		pair{"max_concurrent_builds", ag.MaxConcurrentBuilds, da.MaxConcurrentBuilds},
		pair{"instance_sync_interval", ag.InstanceSyncInterval, da.InstanceSyncInterval},
		pair{"provider_sync_interval", ag.ProviderSyncInterval, da.ProviderSyncInterval},
		pair{"resource_provider_association_refresh", ag.ProviderRefresh, da.ProviderRefresh},
		pair{"reserved_host_memory_mb", ag.Inventory.ReservedHostMemoryMB, da.Inventory.ReservedHostMemoryMB},
		pair{"stop_grace", ag.Process.StopGrace, da.Process.StopGrace},
		pair{"etcd auto_compaction_retention", parse(RoleEtcd).Etcd.Embedded.AutoCompactionRetention, def.Etcd.Embedded.AutoCompactionRetention},
		pair{"etcd_log_level", parse(RoleEtcd).Etcd.Embedded.LogLevel, def.Etcd.Embedded.LogLevel},
		pair{"etcd_heartbeat_interval", parse(RoleEtcd).Etcd.Embedded.HeartbeatInterval, def.Etcd.Embedded.HeartbeatInterval},
		pair{"etcd_election_timeout", parse(RoleEtcd).Etcd.Embedded.ElectionTimeout, def.Etcd.Embedded.ElectionTimeout},
	)
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: the template renders %v, the config default is %v", c.name, c.got, c.want)
		}
	}
}

// TestRenderDeployNoTLS: -no-tls renders plain HTTP and no tls block
// anywhere; -tls-dir moves the files.
func TestRenderDeployNoTLS(t *testing.T) {
	for _, role := range DeployRoles {
		v := labVars("node2", "192.0.2.12", "cell1")
		v.NoTLS = true
		out, err := RenderDeploy(role, v)
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		if strings.Contains(string(out), "https://") || strings.Contains(string(out), "tls {") {
			t.Errorf("%s rendered with NoTLS has TLS:\n%s", role, out)
		}
		v = labVars("node2", "192.0.2.12", "cell1")
		v.TLSDir = "/srv/pki"
		out, err = RenderDeploy(role, v)
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		if !strings.Contains(string(out), `cert_file = "/srv/pki/node2.pem"`) {
			t.Errorf("%s with TLSDir /srv/pki:\n%s", role, out)
		}
	}
	v := labVars("node2", "192.0.2.12", "cell1")
	v.TLSDir = "relative"
	if _, err := RenderDeploy(RoleAgent, v); err == nil || !strings.Contains(err.Error(), "absolute path") {
		t.Errorf("a relative tls dir: %v", err)
	}
}
