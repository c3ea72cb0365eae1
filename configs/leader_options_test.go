package configs

import (
	"testing"
	"time"
)

// The options of the scheduler's HTTP endpoint, its leader duties and the
// superconductor's scheduler calls.
func TestParseLeaderAndDiscoveryOptions(t *testing.T) {
	cfg, err := Parse([]byte("scheduler {}\nsuperconductor {}\n"), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	s, sc := cfg.Scheduler, cfg.Superconductor
	if s.AdvertiseURL != "" || s.LeaderInterval != 30*time.Second || s.DownHostGrace != time.Minute ||
		s.OrphanGrace != 10*time.Minute || s.StuckBuildRequestTimeout != 10*time.Minute {
		t.Errorf("scheduler defaults = %+v", s)
	}
	if sc.LeaseTTL != 10*time.Second || sc.SelectTimeout != 30*time.Second {
		t.Errorf("superconductor defaults = %+v", sc)
	}

	cfg, err = Parse([]byte(`
scheduler {
  advertise_url = "https://sched-1.example:8775"
  leader_interval = "5s"
  down_host_grace = "0s"
  orphan_grace = "1h"
  stuck_build_request_timeout = "2m"
}
superconductor {
  lease_ttl = "20s"
  select_timeout = "2s"
}
`), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	s, sc = cfg.Scheduler, cfg.Superconductor
	if s.AdvertiseURL != "https://sched-1.example:8775" || s.LeaderInterval != 5*time.Second || s.DownHostGrace != 0 ||
		s.OrphanGrace != time.Hour || s.StuckBuildRequestTimeout != 2*time.Minute || sc.LeaseTTL != 20*time.Second || sc.SelectTimeout != 2*time.Second {
		t.Errorf("parsed %+v %+v", s, sc)
	}

	checkRefused(t, []refused{
		{"advertise URL with a path", "scheduler {\n  advertise_url = \"http://h:1/v1\"\n}\n",
			diag{"2:19", "Invalid advertise_url", "no path"}},
		{"advertise URL without scheme", "scheduler {\n  advertise_url = \"h:8775\"\n}\n",
			diag{"2:19", "Invalid advertise_url", "must be an http(s) URL"}},
		{"leader interval too short", "scheduler {\n  leader_interval = \"1ms\"\n}\n",
			diag{"2:21", "Invalid leader_interval", "at least 100ms"}},
		{"orphan grace too short", "scheduler {\n  orphan_grace = \"10ms\"\n}\n",
			diag{"2:18", "Invalid orphan_grace", "must not look orphaned"}},
		{"lease TTL in fractions", "superconductor {\n  lease_ttl = \"2500ms\"\n}\n",
			diag{"2:15", "Invalid lease_ttl", "whole seconds"}},
		{"select timeout not a duration", "superconductor {\n  select_timeout = \"soon\"\n}\n",
			diag{"2:20", "Invalid duration", "not a duration"}},
	})
}

// The leader's etcd space options: defaults, values, and refusals with
// their file:line:col.
func TestParseEtcdDefragOptions(t *testing.T) {
	cfg, err := Parse([]byte("scheduler {}\n"), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Scheduler
	if !s.EtcdDefrag || s.EtcdDefragInterval != 10*time.Minute || s.EtcdDefragRatio != 2 || s.EtcdDefragMinBytes != 256<<20 {
		t.Errorf("etcd defrag defaults = %v %v %v %v", s.EtcdDefrag, s.EtcdDefragInterval, s.EtcdDefragRatio, s.EtcdDefragMinBytes)
	}
	cfg, err = Parse([]byte(`
scheduler {
  etcd_defrag = false
  etcd_defrag_interval = "1h"
  etcd_defrag_ratio = 1.5
  etcd_defrag_min_bytes = 1048576
}
`), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	s = cfg.Scheduler
	if s.EtcdDefrag || s.EtcdDefragInterval != time.Hour || s.EtcdDefragRatio != 1.5 || s.EtcdDefragMinBytes != 1<<20 {
		t.Errorf("parsed etcd defrag = %v %v %v %v", s.EtcdDefrag, s.EtcdDefragInterval, s.EtcdDefragRatio, s.EtcdDefragMinBytes)
	}
	checkRefused(t, []refused{
		{"ratio of 1", "scheduler {\n  etcd_defrag_ratio = 1\n}\n",
			diag{"2:23", "Invalid etcd_defrag_ratio", "greater than 1"}},
		{"interval too short", "scheduler {\n  etcd_defrag_interval = \"10ms\"\n}\n",
			diag{"2:26", "Invalid etcd_defrag_interval", "at least 1s"}},
		{"negative min bytes", "scheduler {\n  etcd_defrag_min_bytes = -1\n}\n",
			diag{"2:27", "Invalid etcd_defrag_min_bytes", "at least 0"}},
	})
}
