package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/internal/testwait"
)

func devArgs(t *testing.T, dataDir, apiAddr string) []string {
	return []string{"dev", "-data-dir", dataDir,
		"-etcd", freeAddr(t),
		"-etcd-peer", freeAddr(t),
		"-api", apiAddr, "-placement", freeAddr(t),
		"-identity", freeAddr(t),
		"-image", freeAddr(t),
		"-hosts", "4", "-cells", "2", "-build-time", "1500ms", "-fail-hosts", "compute-1"}
}

// TestDevSurvivesSIGTERMDuringBuilds stops `berth dev` with SIGTERM while
// builds are in flight and restarts it on the same data dir: every server
// must end ACTIVE or ERROR with a reason, none stuck in BUILD.
func TestDevSurvivesSIGTERMDuringBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	dataDir := filepath.Join(t.TempDir(), "etcd")
	apiAddr := freeAddr(t)
	apiURL := "http://" + apiAddr

	first := startProc(t, "dev-1", devArgs(t, dataDir, apiAddr)...)
	waitHTTP(t, apiURL+"/healthz")
	waitHostsUp(t, apiURL, 4)
	if out, err := runCLI(t, apiURL, "server", "create", "--flavor", "m1.tiny", "--count", "12", "--name", "a"); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	if out, err := runCLI(t, apiURL, "server", "create", "--flavor", "m1.small", "--count", "3", "--name", "b"); err != nil {
		t.Fatalf("create: %v\n%s", err, out)
	}
	// Builds take 1.5s: wait until some are on hosts, then stop mid-flight.
	testwait.Poll(t, 30*time.Second, "builds in flight", func() (bool, string) {
		out, err := runCLI(t, apiURL, "server", "list")
		if err != nil {
			return false, err.Error()
		}
		inFlight := 0
		for _, line := range strings.Split(out, "\n")[1:] {
			if f := strings.Fields(line); len(f) >= 4 && f[2] == "BUILD" && strings.HasPrefix(f[3], "compute-") {
				inFlight++
			}
		}
		return inFlight > 0, out
	})
	if err := first.stop(t, 30*time.Second); err != nil {
		t.Fatalf("berth dev did not exit cleanly on SIGTERM: %v", err)
	}

	startProc(t, "dev-2", devArgs(t, dataDir, apiAddr)...)
	waitHTTP(t, apiURL+"/healthz")
	var final string
	testwait.Poll(t, 90*time.Second, "every server ACTIVE or ERROR", func() (bool, string) {
		out, err := runCLI(t, apiURL, "server", "list")
		if err != nil {
			return false, err.Error()
		}
		final = out
		c := countByStatus(out)
		return c["ACTIVE"]+c["ERROR"] == 15 && c["BUILD"] == 0, out
	})
	for _, line := range strings.Split(final, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) >= 3 && f[2] == "ERROR" && len(f) < 7 {
			t.Errorf("server in ERROR without a reason: %s", line)
		}
	}
	if c := countByStatus(final); c["ACTIVE"] == 0 {
		t.Fatalf("no server became ACTIVE:\n%s", final)
	}
}
