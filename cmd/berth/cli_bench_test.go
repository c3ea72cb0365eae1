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

// TestBenchCLIPrintsTheResult runs a small `berth bench coldstart` as the
// binary does: the result is one JSON line on stdout (-format json) and
// the same line appended to the -json file. (The scenarios themselves
// are package bench's tests.)
func TestBenchCLIPrintsTheResult(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "bench.jsonl")
	args := []string{"bench", "coldstart", "-hosts", "50", "-instances-per-host", "2", "-format", "json",
		"-json", jsonPath, "-data-dir", filepath.Join(t.TempDir(), "etcd")}
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("berth %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	var res bench.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("stdout is not one JSON result: %v\n%s", err, stdout.String())
	}
	if res.Instances != 100 || !strings.HasPrefix(res.Command, "berth bench coldstart -hosts 50") {
		t.Errorf("result %+v: want 100 instances loaded and the command line", res)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSpace(b), bytes.TrimSpace(stdout.Bytes())) {
		t.Errorf("-json file and -format json differ:\n%s\n%s", b, stdout.String())
	}
}

// TestBenchCLIUsageErrors: a bad flag, or a -config the flags contradict,
// is exit 2 with the reason (bench.Config's own test has every case).
func TestBenchCLIUsageErrors(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "agent.hcl")
	if err := os.WriteFile(cfg, []byte("agent {\n  service_down_time = \"20s\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuch"}, "unknown scenario"},
		{[]string{"boot", "extra"}, `unexpected argument "extra"`},
		{[]string{"boot", "-hosts", "x"}, `invalid value "x" for flag -hosts`},
		{[]string{"boot", "-failure-rate", "1"}, "berth bench: -failure-rate"},
		{[]string{"boot", "-config", cfg, "-report-interval", "20s"}, "must exceed their report_interval (20s)"},
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

// TestBenchPlacementCLIUsage: `berth bench placement` wants -url, says
// so, and exits 2; -h prints its flags on stdout. (The measurement
// itself is package bench's TestPlacementBenchAgainstBerth.)
func TestBenchPlacementCLIUsage(t *testing.T) {
	for _, tc := range []struct {
		args        []string
		code        int
		out, errOut string
	}{
		{[]string{"bench", "placement"}, 2, "", "-url is required"},
		{[]string{"bench", "placement", "-url", "http://127.0.0.1:1", "-format", "xml"}, 2, "", "table or json"},
		{[]string{"bench", "placement", "-h"}, 0, "-race-clients", ""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.errOut) {
			t.Errorf("berth %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), code, stdout.String(), stderr.String())
		}
	}
}
