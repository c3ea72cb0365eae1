package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/testwait"
)

// TestProcessDriverColdMoves moves a real guest process between two
// process-driver agents of one dev stack, which share one state_dir as
// berth dev's do: a resize stops the process on the source and starts
// one with the new flavor on the destination; a revert stops that one
// and starts the old flavor's on the source again; a cold migration and
// its confirm leave exactly one process, on the destination, and a
// delete none. At each step every host's record names a live process
// and no other host records the guest.
func TestProcessDriverColdMoves(t *testing.T) {
	procDir := t.TempDir()
	r := newMoveRigWith(t, 2, nil, func(c *configs.Config) {
		c.Agent.Driver = configs.DriverProcess
		c.Agent.Process.StateDir = procDir
		c.Agent.Process.Command = "sleep 300"
		c.Agent.Process.StopGrace = 2 * time.Second
	})
	t.Cleanup(func() { killGuests(procDir) })
	hosts := []string{"compute-1", "compute-2"}
	id := r.boot("mover", "m1.tiny", "compute-1")
	// runsOn waits until the guest's process runs on host only, with
	// flavor, and returns its pid.
	runsOn := func(what, host, flavor string) int {
		t.Helper()
		var pid int
		testwait.Poll(t, 30*time.Second, what, func() (bool, string) {
			for _, h := range hosts {
				p, err := guestPID(procDir, h, id)
				if h != host && !os.IsNotExist(err) {
					return false, fmt.Sprintf("%s still records the guest (pid %d, %v)", h, p, err)
				}
				if h == host {
					if err != nil {
						return false, fmt.Sprintf("%s: %v", h, err)
					}
					pid = p
				}
			}
			if !processRuns(pid) {
				return false, fmt.Sprintf("pid %d on %s does not run", pid, host)
			}
			if got := guestEnv(pid, "BERTH_FLAVOR"); got != flavor {
				return false, fmt.Sprintf("pid %d runs %q, want %s", pid, got, flavor)
			}
			return true, ""
		})
		return pid
	}
	stopped := func(what string, pid int) {
		t.Helper()
		testwait.Poll(t, 30*time.Second, what, func() (bool, string) {
			return !processRuns(pid), fmt.Sprintf("pid %d runs", pid)
		})
	}

	booted := runsOn("the booted guest on compute-1", "compute-1", "m1.tiny")
	r.action(id, map[string]any{"resize": map[string]any{"flavorRef": "2"}}, http.StatusAccepted)
	if h := hostOf(r.waitStatus(id, "VERIFY_RESIZE")); h != "compute-2" {
		t.Fatalf("resized onto %s", h)
	}
	resized := runsOn("the resized guest on compute-2", "compute-2", "m1.small")
	stopped("the source's guest stopped by the resize", booted)

	r.action(id, map[string]any{"revertResize": nil}, http.StatusAccepted)
	if h := hostOf(r.waitStatus(id, "ACTIVE")); h != "compute-1" {
		t.Fatalf("reverted onto %s", h)
	}
	reverted := runsOn("the reverted guest on compute-1", "compute-1", "m1.tiny")
	stopped("the destination's guest stopped by the revert", resized)

	r.action(id, map[string]any{"migrate": nil}, http.StatusAccepted)
	if h := hostOf(r.waitStatus(id, "VERIFY_RESIZE")); h != "compute-2" {
		t.Fatalf("migrated onto %s", h)
	}
	migrated := runsOn("the migrated guest on compute-2", "compute-2", "m1.tiny")
	stopped("the source's guest stopped by the migration", reverted)
	r.action(id, map[string]any{"confirmResize": nil}, http.StatusNoContent)
	if h := hostOf(r.waitStatus(id, "ACTIVE")); h != "compute-2" {
		t.Fatalf("confirmed on %s", h)
	}
	if runsOn("the confirmed guest on compute-2", "compute-2", "m1.tiny") != migrated {
		t.Fatal("the confirm restarted the destination's guest")
	}

	if code, out := r.nova("DELETE", "/servers/"+id, nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d %v", code, out)
	}
	stopped("the guest stopped by the delete", migrated)
	testwait.Poll(t, 30*time.Second, "no host records the guest", func() (bool, string) {
		left, _ := filepath.Glob(filepath.Join(procDir, "*", id+".json"))
		return len(left) == 0, fmt.Sprint(left)
	})
}

// guestPID reads the pid host's process driver recorded for id.
func guestPID(dir, host, id string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, host, id+".json"))
	if err != nil {
		return 0, err
	}
	var rec struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return 0, err
	}
	return rec.PID, nil
}

// processRuns says whether pid runs and is not a zombie.
func processRuns(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || !bytes.HasPrefix(bytes.TrimSpace(b[i+1:]), []byte("Z"))
}

// guestEnv reads one variable of a guest's environment.
func guestEnv(pid int, name string) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte(name+"=")); ok {
			return string(v)
		}
	}
	return ""
}

// killGuests kills every guest any host recorded under dir, so a failed
// test leaves no process behind.
func killGuests(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.json"))
	for _, f := range files {
		if pid, err := guestPID(dir, filepath.Base(filepath.Dir(f)), filepath.Base(f[:len(f)-len(".json")])); err == nil && pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
}
