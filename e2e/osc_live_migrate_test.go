package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestOpenStackCLILiveMigrate live-migrates a server of a real `berth
// dev` (etcd, scheduler, conductors, two agents with the fake driver)
// with the real openstack CLI, `server migrate --live-migration --wait`,
// then back with `berth server migrate --live --host compute-1 --wait`,
// and reads both live-migrations completed in `openstack server
// migration list`.
func TestOpenStackCLILiveMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	skipWithoutOSC(t)
	dev := startDevStack(t, 2, 1)
	apiURL := dev.apiURL
	openstack := computeCLI(t, apiURL+"/v2.1")
	berth := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, apiURL, args...)
		if err != nil {
			t.Fatalf("berth %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	// (runCLI's output has the wait's progress lines: the server goes by
	// its name.)
	berth("server", "create", "--flavor", "m1.tiny", "--name", "runner", "--host", "compute-1", "--wait")
	id := "runner"

	openstack("server", "migrate", "--live-migration", "--wait", id)
	var s map[string]any
	if err := json.Unmarshal([]byte(openstack("server", "show", "-f", "json", id)), &s); err != nil {
		t.Fatal(err)
	}
	if s["status"] != "ACTIVE" || s["OS-EXT-SRV-ATTR:host"] != "compute-2" {
		t.Fatalf("after openstack server migrate --live-migration: %v on %v", s["status"], s["OS-EXT-SRV-ATTR:host"])
	}
	if out := berth("server", "migrate", "--live", "--host", "compute-1", "runner", "--wait", "--interval", "100ms",
		"-o", "value", "-c", "status", "-c", "host"); !strings.HasSuffix(out, "ACTIVE compute-1\n") {
		t.Fatalf("berth server migrate --live --host compute-1 printed %q", out)
	}
	var migs []map[string]any
	if err := json.Unmarshal([]byte(openstack("server", "migration", "list", "--server", id, "-f", "json")), &migs); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range migs {
		got = append(got, fmt.Sprint(m["Type"], " ", m["Status"], " ", m["Source Compute"], ">", m["Dest Compute"]))
	}
	want := []string{"live-migration completed compute-2>compute-1", "live-migration completed compute-1>compute-2"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("server migration list: %v, want %v", got, want)
	}
}
