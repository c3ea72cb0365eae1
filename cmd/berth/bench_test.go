package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/bench"
)

// runBench runs `berth bench` as the binary does and decodes its JSON line.
// It fails on a non-zero exit (an error, or a lost server), never on timing.
func runBench(t *testing.T, args ...string) *bench.Result {
	t.Helper()
	jsonPath := filepath.Join(t.TempDir(), "bench.jsonl")
	var stdout, stderr bytes.Buffer
	args = append(args, "-format", "json", "-json", jsonPath, "-data-dir", filepath.Join(t.TempDir(), "etcd"))
	if code := run(append([]string{"bench"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("berth bench %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	var res bench.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not one JSON result: %v\n%s", err, stdout.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(b), bytes.TrimSpace(stdout.Bytes())) {
		t.Errorf("-json file and -format json differ:\n%s\n%s", b, stdout.String())
	}
	return &res
}

// TestBenchBootSmoke is CI's small `berth bench`: 1,000 simulated hosts,
// 200 servers with hints, groups and reschedulable build failures, and
// the CAS baseline. It fails only on errors or lost servers.
func TestBenchBootSmoke(t *testing.T) {
	const servers = 200
	res := runBench(t, "boot", "-hosts", "1000", "-cells", "2", "-servers", "200", "-clients", "8",
		"-hint-ratio", "0.1", "-group-ratio", "0.1", "-groups", "4", "-failure-rate", "0.05",
		"-baseline", "-baseline-time", "300ms", "-timeout", "5m")
	if res.Lost != 0 || res.APIErrors != 0 {
		t.Fatalf("%d servers lost, %d API errors: %+v", res.Lost, res.APIErrors, res)
	}
	if got := res.Active + res.Errors + res.NoValidHost; got != servers {
		t.Fatalf("%d servers accounted for (%d ACTIVE, %d ERROR, %d NoValidHost), want %d",
			got, res.Active, res.Errors, res.NoValidHost, servers)
	}
	if res.Active == 0 || res.Stages["total"].N != res.Active {
		t.Fatalf("stage samples %+v for %d ACTIVE servers", res.Stages["total"], res.Active)
	}
	if res.Writes == nil || res.Writes.Puts["placement/consumers"] == 0 || res.CASPerSec <= 0 || res.ClaimOnlyPerSec <= 0 {
		t.Fatalf("no claims or no CAS baseline recorded: %+v", res)
	}
	if res.HostsPerSec <= 0 || res.Hosts != 1000 {
		t.Fatalf("populate not reported: %+v", res)
	}
}

// TestBenchColdstartSmoke loads a fresh scheduler's views over a small
// directly-populated etcd; the scenario itself checks every host and
// instance was loaded.
func TestBenchColdstartSmoke(t *testing.T) {
	res := runBench(t, "coldstart", "-hosts", "300", "-instances-per-host", "3")
	if res.ColdStartSec <= 0 || res.Instances != 900 {
		t.Fatalf("cold start not reported: %+v", res)
	}
}

// TestBenchFlags: bad flags are a usage error that says which.
func TestBenchFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuch"}, "unknown scenario"},
		{[]string{"boot", "-hosts", "0"}, "-hosts and -cells"},
		{[]string{"failover", "-schedulers", "1"}, "failover needs -schedulers 2"},
		{[]string{"boot", "-etcd", "127.0.0.1:1"}, "needs both -etcd and -api"},
		{[]string{"boot", "-failure-rate", "1"}, "-failure-rate"},
		{[]string{"boot", "-format", "xml"}, "-format"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"bench"}, tc.args...), &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q does not say %q", tc.args, stderr.String(), tc.want)
		}
	}
}

// TestBenchFailoverSmoke kills the scheduler leader of three during a
// burst; the run itself fails if any server is lost or no new leader is
// elected. Short TTLs keep it to seconds.
func TestBenchFailoverSmoke(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bench.hcl")
	if err := os.WriteFile(cfg, []byte("scheduler {\n  election_ttl = \"2s\"\n}\nsuperconductor {\n  lease_ttl = \"2s\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := runBench(t, "failover", "-config", cfg, "-schedulers", "3", "-hosts", "200", "-servers", "90",
		"-clients", "4", "-rate", "30", "-timeout", "3m")
	if res.Lost != 0 || res.Active != 90 {
		t.Fatalf("%d ACTIVE, %d lost of 90: %+v", res.Active, res.Lost, res)
	}
	if res.LeaderKilled == "" || res.NewLeader == "" || res.NewLeader == res.LeaderKilled {
		t.Fatalf("no failover recorded: killed %q, new leader %q", res.LeaderKilled, res.NewLeader)
	}
}
