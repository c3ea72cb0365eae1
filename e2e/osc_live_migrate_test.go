package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/berth-project/berth/internal/etcdtest"
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
	apiAddr := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	apiURL := "http://" + apiAddr
	startProc(t, "dev", "dev", "-data-dir", t.TempDir(),
		"-etcd", fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)),
		"-etcd-peer", fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)),
		"-api", apiAddr, "-placement", fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t)),
		"-hosts", "2", "-cells", "1")
	waitHTTP(t, apiURL+"/healthz")
	waitHostsUp(t, apiURL, 2)

	env := newOSC(t, apiURL+"/v2.1", "").env
	openstack := func(args ...string) string {
		t.Helper()
		full := append([]string{"--os-auth-type", "admin_token", "--os-token", "admin:admin", "--os-endpoint", apiURL + "/v2.1",
			"--os-compute-api-version", "2.latest"}, args...)
		cmd := exec.Command("openstack", full...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("openstack %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String()
	}
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
