package configs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// diag is one expected diagnostic line: its position and summary exactly,
// and a fragment of its detail (the reason), so rewording a sentence does
// not break the test but moving the position does.
type diag struct {
	at      string // "line:col"
	summary string
	detail  string
}

// refused is a config Parse must refuse with one diagnostic, want first.
type refused struct {
	desc, src string
	want      diag
}

// checkRefused parses each case and checks its error begins with want's
// position and summary and carries want's detail.
func checkRefused(t *testing.T, cases []refused) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "t.hcl")
			if err == nil {
				t.Fatal("accepted")
			}
			prefix := "t.hcl:" + tc.want.at + ": " + tc.want.summary + ": "
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.want.detail) {
				t.Errorf("got  %s\nwant %s...%s", err, prefix, tc.want.detail)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		desc string
		src  string
		want []diag
	}{
		{
			desc: "unknown block",
			src:  "foo {}\n",
			want: []diag{{"1:1", "Unsupported block type", `Blocks of type "foo" are not expected here`}},
		},
		{
			desc: "unknown attribute suggests the right one",
			src:  "scheduler {\n  max_atempts = 3\n}\n",
			want: []diag{{"2:3", "Unsupported argument", `Did you mean "max_attempts"?`}},
		},
		{
			desc: "unknown attribute in nested block",
			src:  "agent {\n  inventory {\n    cpus = 4\n  }\n}\n",
			want: []diag{{"3:5", "Unsupported argument", `An argument named "cpus" is not expected here`}},
		},
		{
			desc: "string where a number belongs",
			src:  "scheduler {\n  max_attempts = \"three\"\n}\n",
			want: []diag{{"2:18", "Unsuitable value type", "scheduler.max_attempts: a number is required."}},
		},
		{
			desc: "string where a bool belongs",
			src:  "agent {\n  fake {\n    fail = \"maybe\"\n  }\n}\n",
			want: []diag{{"3:12", "Unsuitable value type", "agent.fake.fail: a bool is required."}},
		},
		{
			desc: "fraction where a count belongs",
			src:  "superconductor {\n  workers = 1.5\n}\n",
			want: []diag{{"2:13", "Unsuitable value type", "superconductor.workers: value must be a whole number"}},
		},
		{
			desc: "string where a list belongs",
			src:  "scheduler {\n  enabled_filters = \"ComputeFilter\"\n}\n",
			want: []diag{{"2:21", "Unsuitable value type", "scheduler.enabled_filters: list of string required"}},
		},
		{
			desc: "duplicate block",
			src:  "api {}\napi {}\n",
			want: []diag{{"2:1", "Duplicate api block", "Only one api block is allowed"}},
		},
		{
			desc: "syntax error",
			src:  "api {\n  bind = \n}\n",
			want: []diag{{"2:10", "Invalid expression", "Expected the start of an expression"}},
		},
		{
			desc: "bad duration",
			src:  "etcd {\n  dial_timeout = \"5 seconds\"\n}\n",
			want: []diag{{"2:18", "Invalid duration", `dial_timeout = "5 seconds" is not a duration`}},
		},
		{
			desc: "duration without unit",
			src:  "conductor {\n  cell = \"c1\"\n  lease_ttl = 15\n}\n",
			want: []diag{{"3:15", "Invalid duration", `lease_ttl = "15" is not a duration`}},
		},
		{
			desc: "negative duration",
			src:  "agent {\n  fake {\n    build_time = \"-1s\"\n  }\n}\n",
			want: []diag{{"3:18", "Invalid build_time", "build_time must be at least 0s"}},
		},
		{
			desc: "lease TTL in fractions of a second",
			src:  "scheduler {\n  election_ttl = \"1500ms\"\n}\n",
			want: []diag{{"2:18", "Invalid election_ttl", "must be whole seconds"}},
		},
		{
			desc: "lease TTL under a second",
			src:  "conductor {\n  lease_ttl = \"500ms\"\n}\n",
			want: []diag{{"2:15", "Invalid lease_ttl", "lease_ttl must be at least 1s"}},
		},
		{
			desc: "bad log format",
			src:  "log {\n  format = \"xml\"\n}\n",
			want: []diag{{"2:12", "Invalid format", `format must be one of "text", "json"; got "xml".`}},
		},
		{
			desc: "bad log level",
			src:  "log {\n  level = \"verbose\"\n}\n",
			want: []diag{{"2:11", "Invalid level", `level must be one of "trace", "debug", "info", "warn", "error"`}},
		},
		{
			desc: "bad driver",
			src:  "agent {\n  driver = \"libvirt\"\n}\n",
			want: []diag{{"2:12", "Invalid driver", `driver must be one of "fake", "process"; got "libvirt".`}},
		},
		{
			desc: "bad auth",
			src:  "placement {\n  auth = \"kerberos\"\n}\n",
			want: []diag{{"2:10", "Invalid auth", `auth must be one of "noauth", "tokens", "keystone"; got "kerberos".`}},
		},
		{
			desc: "token block without its secret label",
			src:  "placement {\n  auth = \"tokens\"\n  token {\n  }\n}\n",
			want: []diag{{"3:9", "Missing secret for token", "must have 1 labels (secret)"}},
		},
		{
			desc: "tokens mode without tokens",
			src:  "placement {\n  auth = \"tokens\"\n}\n",
			want: []diag{{"2:10", "No tokens", `needs at least one token`}},
		},
		{
			desc: "tokens while auth is noauth",
			src:  "placement {\n  token \"abc\" {\n    roles = [\"admin\"]\n  }\n}\n",
			want: []diag{{"2:3", `Tokens without auth = "tokens"`, "token blocks are ignored"}},
		},
		{
			desc: "bad system_scope",
			src:  "placement {\n  auth = \"tokens\"\n  token \"abc\" {\n    system_scope = \"project\"\n  }\n}\n",
			want: []diag{{"4:20", "Invalid system_scope", `system_scope must be one of "", "all"; got "project".`}},
		},
		{
			desc: "duplicate and empty tokens",
			src:  "placement {\n  auth = \"tokens\"\n  token \"abc\" {}\n  token \"abc\" {}\n  token \"\" {}\n}\n",
			want: []diag{
				{"4:9", "Duplicate token", "already defined at t.hcl:3"},
				{"5:9", "Empty token", "cannot be empty"},
			},
		},
		{
			desc: "embedded and endpoints both set",
			src:  "etcd {\n  endpoints = [\"http://10.0.0.1:2379\"]\n  embedded {\n    data_dir = \"/tmp/x\"\n  }\n}\n",
			want: []diag{{"3:3", "Both embedded and endpoints", "endpoints (line 2) name an external cluster"}},
		},
		{
			desc: "empty endpoints",
			src:  "etcd {\n  endpoints = []\n}\n",
			want: []diag{{"2:15", "Empty endpoints", "at least one etcd client URL"}},
		},
		{
			desc: "embedded member's TLS without its certificate",
			src:  "etcd {\n  tls {\n    ca_file = \"ca.pem\"\n  }\n}\n",
			want: []diag{{"2:3", "Missing cert_file", "set all three"}, {"2:3", "Missing key_file", "set all three"}},
		},
		{
			desc: "embedded member's TLS without a CA",
			src:  "etcd {\n  tls {\n    cert_file = \"c.pem\"\n    key_file = \"k.pem\"\n  }\n}\n",
			want: []diag{{"2:3", "Missing ca_file", "requires client and peer certificates chaining to ca_file"}},
		},
		{
			desc: "auth with embedded etcd",
			src:  "etcd {\n  username = \"berth\"\n}\n",
			want: []diag{{"2:14", "Auth with embedded etcd", "apply only to external endpoints"}},
		},
		{
			desc: "embedded http client url with TLS",
			src:  "etcd {\n  tls {\n    cert_file = \"c.pem\"\n    key_file = \"k.pem\"\n    ca_file = \"ca.pem\"\n  }\n  embedded {\n    client_url = \"http://127.0.0.1:2379\"\n  }\n}\n",
			want: []diag{{"8:18", "Invalid client_url", "must be an https URL with a port, like \"https://127.0.0.1:2379\" (the etcd block's tls serves it)"}},
		},
		{
			desc: "http peers of an https member",
			src:  "etcd {\n  tls {\n    cert_file = \"c.pem\"\n    key_file = \"k.pem\"\n    ca_file = \"ca.pem\"\n  }\n  embedded {\n    name = \"a\"\n    peer_url = \"https://10.0.0.1:2380\"\n    initial_cluster = \"a=https://10.0.0.1:2380,b=http://10.0.0.2:2380\"\n  }\n}\n",
			want: []diag{{"10:23", "Invalid initial_cluster", "Each member is name=https://host:port"}},
		},
		{
			desc: "certificate without key",
			src:  "etcd {\n  endpoints = [\"https://e:2379\"]\n  tls {\n    cert_file = \"c.pem\"\n  }\n}\n",
			want: []diag{{"4:17", "Certificate without key", "cert_file needs key_file"}},
		},
		{
			desc: "password without username",
			src:  "etcd {\n  endpoints = [\"http://e:2379\"]\n  password = \"pw\"\n}\n",
			want: []diag{{"3:14", "Password without username", "set username too"}},
		},
		{
			desc: "prefix without slash",
			src:  "etcd {\n  prefix = \"berth\"\n}\n",
			want: []diag{{"2:12", "Invalid prefix", `must start with "/"`}},
		},
		{
			desc: "initial_cluster without this member",
			src:  "etcd {\n  embedded {\n    name = \"etcd-9\"\n    initial_cluster = \"etcd-1=http://10.0.0.1:2380,etcd-2=http://10.0.0.2:2380\"\n  }\n}\n",
			want: []diag{{"4:23", "This member is not in initial_cluster", `by its name "etcd-9"`}},
		},
		{
			desc: "initial_cluster disagrees with peer_url",
			src:  "etcd {\n  embedded {\n    name = \"etcd-1\"\n    peer_url = \"http://10.0.0.1:2380\"\n    initial_cluster = \"etcd-1=http://10.0.0.9:2380\"\n  }\n}\n",
			want: []diag{{"5:23", "initial_cluster disagrees with peer_url", `peer_url is "http://10.0.0.1:2380"`}},
		},
		{
			desc: "initial_cluster entry without a URL",
			src:  "etcd {\n  embedded {\n    initial_cluster = \"berth=http://127.0.0.1:2380,etcd-2\"\n  }\n}\n",
			want: []diag{{"3:23", "Invalid initial_cluster", `got "etcd-2"`}},
		},
		{
			desc: "initial_cluster names a member twice",
			src:  "etcd {\n  embedded {\n    initial_cluster = \"berth=http://127.0.0.1:2380,berth=http://127.0.0.2:2380\"\n  }\n}\n",
			want: []diag{{"3:23", "Duplicate member in initial_cluster", `"berth" is listed twice`}},
		},
		{
			desc: "initial_cluster_state neither new nor existing",
			src:  "etcd {\n  embedded {\n    initial_cluster_state = \"join\"\n  }\n}\n",
			want: []diag{{"3:29", "Invalid initial_cluster_state", `"join"`}},
		},
		{
			desc: "embedded log_level not one of etcd's",
			src:  "etcd {\n  embedded {\n    log_level = \"trace\"\n  }\n}\n",
			want: []diag{{"3:17", "Invalid log_level", `log_level must be one of "debug", "info", "warn", "error"; got "trace".`}},
		},
		{
			desc: "election_timeout under five heartbeats",
			src:  "etcd {\n  embedded {\n    heartbeat_interval = \"300ms\"\n    election_timeout = \"1s\"\n  }\n}\n",
			want: []diag{{"4:24", "election_timeout too short for heartbeat_interval", "election_timeout (1s) must be at least 5 times heartbeat_interval (300ms)"}},
		},
		{
			desc: "heartbeat_interval alone, past the default election_timeout's fifth",
			src:  "etcd {\n  embedded {\n    heartbeat_interval = \"250ms\"\n  }\n}\n",
			want: []diag{{"3:26", "election_timeout too short for heartbeat_interval", "heartbeat_interval (250ms)"}},
		},
		{
			desc: "election_timeout past etcd's 50s",
			src:  "etcd {\n  embedded {\n    election_timeout = \"1m\"\n  }\n}\n",
			want: []diag{{"3:24", "Invalid election_timeout", "at most 50s"}},
		},
		{
			desc: "heartbeat_interval not whole milliseconds",
			src:  "etcd {\n  embedded {\n    heartbeat_interval = \"100500us\"\n  }\n}\n",
			want: []diag{{"3:26", "Invalid heartbeat_interval", "whole milliseconds"}},
		},
		{
			desc: "heartbeat_interval under a millisecond",
			src:  "etcd {\n  embedded {\n    heartbeat_interval = \"500us\"\n  }\n}\n",
			want: []diag{{"3:26", "Invalid heartbeat_interval", "at least 1ms"}},
		},
		{
			desc: "embedded https client url",
			src:  "etcd {\n  embedded {\n    client_url = \"https://127.0.0.1:2379\"\n  }\n}\n",
			want: []diag{{"3:18", "Invalid client_url", "serves plain HTTP without an etcd tls block"}},
		},
		{
			desc: "embedded empty data dir and negative quota",
			src:  "etcd {\n  embedded {\n    data_dir = \"\"\n    quota_backend_bytes = -1\n  }\n}\n",
			want: []diag{
				{"4:27", "Invalid quota_backend_bytes", "quota_backend_bytes must be at least 0"},
				{"3:16", "Empty data_dir", "needs a directory"},
			},
		},
		{
			desc: "negative counts",
			src:  "superconductor {\n  workers = -1\n}\nconductor {\n  workers = 0\n}\nagent {\n  inventory {\n    vcpus = -4\n  }\n}\n",
			want: []diag{
				{"2:13", "Invalid workers", "workers must be at least 1 (nothing would lease build requests); got -1."},
				{"5:13", "Invalid workers", "workers must be at least 1 (nothing would lease retries); got 0."},
				{"9:13", "Invalid vcpus", "vcpus must be at least 0"},
			},
		},
		{
			desc: "max_attempts zero",
			src:  "scheduler {\n  max_attempts = 0\n  max_hosts_to_weigh = -1\n}\n",
			want: []diag{
				{"2:18", "Invalid max_attempts", "max_attempts must be at least 1 (it counts the first try); got 0."},
				{"3:24", "Invalid max_hosts_to_weigh", "max_hosts_to_weigh must be at least 0"},
			},
		},
		{
			desc: "allocation ratio zero or negative",
			src:  "agent {\n  inventory {\n    cpu_allocation_ratio = 0\n    ram_allocation_ratio = -1.5\n  }\n}\n",
			want: []diag{
				{"3:28", "Invalid cpu_allocation_ratio", "cpu_allocation_ratio must be greater than 0"},
				{"4:28", "Invalid ram_allocation_ratio", "got -1.5"},
			},
		},
		{
			desc: "reservation not smaller than total",
			src:  "agent {\n  inventory {\n    memory_mb = 512\n  }\n}\n",
			want: []diag{{"3:17", "Reservation too large", "reserved_host_memory_mb (512) must be less than memory_mb (512)"}},
		},
		{
			desc: "failure rate above one",
			src:  "agent {\n  fake {\n    failure_rate = 1.5\n  }\n}\n",
			want: []diag{{"3:20", "Invalid failure_rate", "between 0 and 1; got 1.5"}},
		},
		{
			desc: "service_down_time not above report_interval",
			src:  "agent {\n  report_interval = \"30s\"\n  service_down_time = \"30s\"\n}\n",
			want: []diag{{"3:23", "service_down_time too short", "service_down_time (30s) must exceed report_interval (30s)"}},
		},
		{
			desc: "report_interval above the default down time",
			src:  "agent {\n  report_interval = \"90s\"\n}\n",
			want: []diag{{"2:21", "service_down_time too short", "must exceed report_interval (1m30s)"}},
		},
		{
			desc: "bad duration is not also compared",
			src:  "agent {\n  report_interval = \"soon\"\n  service_down_time = \"1s\"\n}\n",
			want: []diag{{"2:21", "Invalid duration", `report_interval = "soon" is not a duration`}},
		},
		{
			desc: "host with a slash",
			src:  "agent {\n  host = \"rack1/compute-1\"\n}\n",
			want: []diag{{"2:10", "Invalid host", "part of etcd keys"}},
		},
		{
			desc: "bad bind address",
			src:  "api {\n  bind = \"8774\"\n}\nplacement {\n  bind = \"localhost:http-alt\"\n}\n",
			want: []diag{
				{"2:10", "Invalid bind", `bind must be host:port`},
				{"5:10", "Invalid bind", `got "localhost:http-alt"`},
			},
		},
		{
			desc: "status block without bind",
			src:  "status {\n}\n",
			want: []diag{{"1:1", "Missing bind", "remove the block to serve none"}},
		},
		{
			desc: "bad status bind",
			src:  "status {\n  bind = \"9102\"\n}\n",
			want: []diag{{"2:10", "Invalid bind", `got "9102"`}},
		},
		{
			desc: "bad default availability zone",
			src:  "default_availability_zone = \"az:1\"\n",
			want: []diag{{"1:29", "Invalid default_availability_zone", `without ':'; got "az:1"`}},
		},
		{
			desc: "duplicate filter",
			src:  "scheduler {\n  enabled_filters = [\"ComputeFilter\", \"ComputeFilter\"]\n}\n",
			want: []diag{{"2:21", "Duplicate filter", `"ComputeFilter" is listed twice`}},
		},
		{
			desc: "every value error in a file is reported at once",
			src:  "log {\n  level = \"loud\"\n}\nagent {\n  driver = \"vm\"\n}\n",
			want: []diag{
				{"2:11", "Invalid level", `got "loud"`},
				{"5:12", "Invalid driver", `got "vm"`},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.src), "t.hcl")
			if err == nil {
				t.Fatalf("Parse succeeded (%+v), want %d diagnostics", cfg, len(tc.want))
			}
			var de *DiagnosticsError
			if !errors.As(err, &de) {
				t.Fatalf("error is %T, want *DiagnosticsError: %v", err, err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				prefix := "t.hcl:" + w.at + ": " + w.summary + ": "
				if !strings.HasPrefix(lines[i], prefix) || !strings.Contains(lines[i], w.detail) {
					t.Errorf("diagnostic %d:\n got %s\nwant %s...%s", i, lines[i], prefix, w.detail)
				}
			}
		})
	}
}

func TestParseEmptyFileIsDefaults(t *testing.T) {
	cfg, err := Parse(nil, "empty.hcl")
	if err != nil {
		t.Fatal(err)
	}
	def := Defaults()
	if cfg.Filename != "empty.hcl" {
		t.Errorf("Filename = %q", cfg.Filename)
	}
	if cfg.Log != def.Log {
		t.Errorf("Log = %+v, want %+v", cfg.Log, def.Log)
	}
	if cfg.Etcd.Prefix != "/berth" || cfg.Etcd.DialTimeout != 5*time.Second || len(cfg.Etcd.Endpoints) != 0 {
		t.Errorf("Etcd = %+v", cfg.Etcd)
	}
	if cfg.Etcd.Embedded == nil || *cfg.Etcd.Embedded != *def.Etcd.Embedded {
		t.Errorf("Embedded = %+v, want the default embedded etcd", cfg.Etcd.Embedded)
	}
	if cfg.API != nil || cfg.Placement != nil || cfg.Scheduler != nil || cfg.Superconductor != nil || cfg.Conductor != nil || cfg.Agent != nil {
		t.Errorf("role blocks enabled by an empty file: %+v", cfg)
	}
}

func TestParseAppliesDefaultsToUnsetValues(t *testing.T) {
	src := `
etcd {
  endpoints = ["http://10.0.0.1:2379"]
}
scheduler {
  max_attempts = 5
  track_instance_changes = false
  weights {
    ram = -1.0
  }
}
agent {
  host = "compute-1"
  cell = "cell1"
  report_interval = "5s"
  inventory {
    vcpus = 8
  }
  fake {
    fail = true
  }
}
`
	cfg, err := Parse([]byte(src), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	def := Defaults()
	if cfg.Etcd.Embedded != nil {
		t.Errorf("endpoints set but Embedded = %+v", cfg.Etcd.Embedded)
	}
	if cfg.DefaultAvailabilityZone != "nova" {
		t.Errorf("DefaultAvailabilityZone = %q, want nova", cfg.DefaultAvailabilityZone)
	}
	s := cfg.Scheduler
	if s.LimitTenantsToPlacementAggregate || s.PlacementAggregateRequiredForTenants || s.EnableIsolatedAggregateFiltering {
		t.Errorf("aggregate request filters must be off by default: %+v", s)
	}
	if s.MaxAttempts != 5 || s.TrackInstanceChanges || s.HostSubsetSize != 1 || s.MaxPlacementResults != 1000 || s.ElectionTTL != 10*time.Second || s.Bind != "127.0.0.1:8775" {
		t.Errorf("Scheduler = %+v", s)
	}
	if len(s.EnabledFilters) != len(def.Scheduler.EnabledFilters) {
		t.Errorf("EnabledFilters = %v", s.EnabledFilters)
	}
	wantW := def.Scheduler.Weights
	wantW.RAM = -1
	if s.Weights != wantW {
		t.Errorf("Weights = %+v, want %+v", s.Weights, wantW)
	}
	a := cfg.Agent
	if a.ReportInterval != 5*time.Second || a.ServiceDownTime != 60*time.Second || a.Driver != DriverFake || a.MaxConcurrentBuilds != 10 || !a.TrackInstanceChanges || a.InstanceSyncInterval != 120*time.Second {
		t.Errorf("Agent = %+v", a)
	}
	wantInv := def.Agent.Inventory
	wantInv.VCPUs = 8
	if a.Inventory != wantInv {
		t.Errorf("Inventory = %+v, want %+v (memory and disk 0 = detect)", a.Inventory, wantInv)
	}
	if !a.Fake.Fail || !a.Fake.FailReschedulable {
		t.Errorf("Fake = %+v", a.Fake)
	}
}

func TestParseTokens(t *testing.T) {
	src := `
placement {
  auth = "tokens"
  token "a" {
    roles = ["admin"]
    project_id = "p1"
    user_id = "u1"
  }
  token "b" {}
  token "c" {
    roles = ["reader"]
    system_scope = "all"
  }
}
`
	cfg, err := Parse([]byte(src), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Placement
	if p.Auth != AuthTokens || p.Bind != "127.0.0.1:8778" || len(p.Tokens) != 3 {
		t.Fatalf("Placement = %+v", p)
	}
	a := p.Tokens[0]
	if a.Token != "a" || len(a.Roles) != 1 || a.Roles[0] != "admin" || a.ProjectID != "p1" || a.UserID != "u1" {
		t.Errorf("Tokens[0] = %+v", a)
	}
	if p.Tokens[1].Token != "b" || p.Tokens[1].SystemScope != "" {
		t.Errorf("Tokens[1] = %+v", p.Tokens[1])
	}
	if c := p.Tokens[2]; c.SystemScope != "all" || len(c.Roles) != 1 || c.Roles[0] != "reader" {
		t.Errorf("Tokens[2] = %+v", c)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("does-not-exist.hcl")
	if err == nil || !strings.Contains(err.Error(), "does-not-exist.hcl") {
		t.Fatalf("err = %v, want one naming the file", err)
	}
}

// TestStatusBind: the status listener is off unless a file sets it, and
// any role's file may set it.
func TestStatusBind(t *testing.T) {
	if b := Defaults().Status.Bind; b != "" {
		t.Errorf("default status bind = %q, want off", b)
	}
	cfg, err := Parse([]byte("status {\n  bind = \"127.0.0.1:8793\"\n}\n"), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Status.Bind != "127.0.0.1:8793" {
		t.Errorf("status bind = %q", cfg.Status.Bind)
	}
}

// TestParseEmbeddedRaftTiming: heartbeat_interval and election_timeout
// are decoded, default to etcd's own, and are checked as a pair.
func TestParseEmbeddedRaftTiming(t *testing.T) {
	for _, tc := range []struct {
		src                 string
		heartbeat, election time.Duration
	}{
		{"", 100 * time.Millisecond, time.Second},
		{"etcd {\n  embedded {\n    heartbeat_interval = \"200ms\"\n    election_timeout = \"2s\"\n  }\n}\n", 200 * time.Millisecond, 2 * time.Second},
		{"etcd {\n  embedded {\n    election_timeout = \"5s\"\n  }\n}\n", 100 * time.Millisecond, 5 * time.Second},
		{"etcd {\n  embedded {\n    heartbeat_interval = \"200ms\"\n  }\n}\n", 200 * time.Millisecond, time.Second},
	} {
		cfg, err := Parse([]byte(tc.src), "t.hcl")
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		e := cfg.Etcd.Embedded
		if e.HeartbeatInterval != tc.heartbeat || e.ElectionTimeout != tc.election {
			t.Errorf("%q: heartbeat %s, election %s; want %s, %s", tc.src, e.HeartbeatInterval, e.ElectionTimeout, tc.heartbeat, tc.election)
		}
		if ec := e.EmbedConfig(); ec.HeartbeatInterval != tc.heartbeat || ec.ElectionTimeout != tc.election {
			t.Errorf("%q: EmbedConfig carries heartbeat %s, election %s", tc.src, ec.HeartbeatInterval, ec.ElectionTimeout)
		}
	}
}

// TestParseEmbeddedLogLevel: etcd's own level is decoded, and an embedded
// block without it keeps the quiet default rather than log { level }.
func TestParseEmbeddedLogLevel(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"etcd {\n  embedded {\n    log_level = \"info\"\n  }\n}\n", "info"},
		{"etcd {\n  embedded {\n    log_level = \"error\"\n  }\n}\nlog {\n  level = \"debug\"\n}\n", "error"},
		{"etcd {\n  embedded {\n    data_dir = \"/tmp/e\"\n  }\n}\nlog {\n  level = \"debug\"\n}\n", "warn"},
		{"", "warn"},
	} {
		cfg, err := Parse([]byte(tc.src), "t.hcl")
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if got := cfg.Etcd.Embedded.LogLevel; got != tc.want {
			t.Errorf("%q: LogLevel = %q, want %q", tc.src, got, tc.want)
		}
	}
}

// TestParseProviderRefresh: the agent's resource_provider_association_refresh
// (Nova's [compute] option) defaults to 300 s, takes 0 (never refresh on
// its own, as in Nova) and any positive duration, and a negative or
// unreadable value is an error naming the setting, with file and line.
func TestParseProviderRefresh(t *testing.T) {
	for _, tc := range []struct {
		desc, src string
		want      time.Duration
		err       string // a diagnostic's prefix and detail, "" for none
		detail    string
	}{
		{desc: "unset", src: "agent {\n}\n", want: 300 * time.Second},
		{desc: "zero never refreshes", src: "agent {\n  resource_provider_association_refresh = \"0s\"\n}\n", want: 0},
		{desc: "ten minutes", src: "agent {\n  resource_provider_association_refresh = \"10m\"\n}\n", want: 10 * time.Minute},
		{desc: "negative", src: "agent {\n  resource_provider_association_refresh = \"-1s\"\n}\n",
			err:    "t.hcl:2:43: Invalid resource_provider_association_refresh: ",
			detail: "resource_provider_association_refresh must be at least 0s (0 never re-reads the provider on its own); got -1s."},
		{desc: "not a duration", src: "agent {\n  resource_provider_association_refresh = 300\n}\n",
			err:    "t.hcl:2:43: Invalid duration: ",
			detail: `resource_provider_association_refresh = "300" is not a duration`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.src), "t.hcl")
			if tc.err != "" {
				if err == nil {
					t.Fatalf("Parse succeeded (refresh %s), want %s%s", cfg.Agent.ProviderRefresh, tc.err, tc.detail)
				}
				if msg := err.Error(); !strings.HasPrefix(msg, tc.err) || !strings.Contains(msg, tc.detail) || strings.Contains(msg, "\n") {
					t.Fatalf("error:\n got %s\nwant %s...%s", msg, tc.err, tc.detail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Agent.ProviderRefresh; got != tc.want {
				t.Fatalf("ProviderRefresh = %s, want %s", got, tc.want)
			}
		})
	}
}
