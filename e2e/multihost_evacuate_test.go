package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// TestMultiHostEvacuate: the multi-host deployment with the process
// driver (each server a real `sleep` process on its host). compute-1's
// agent is SIGKILLed (its guests go on running, as a hypervisor's would
// when only nova-compute dies) and forced down; its servers are
// evacuated through the Nova API and come up ACTIVE on compute-2 and
// compute-3, each with a new process there and its allocation only on
// its destination. When compute-1's agent starts again it kills its
// stale copies and drops them from its instance info, so no server runs
// twice, and the evacuations end completed (the clean-up casts the cell
// conductor left waiting for it ended too). The multi-host invariants
// hold after it.
func TestMultiHostEvacuate(t *testing.T) {
	vars := maps.Clone(mhVars)
	vars["driver"], vars["process_command"], vars["stop_grace"] = "process", "sleep 600", "2s"
	c := newMHClusterVars(t, vars)
	for _, h := range []string{"compute-1", "compute-2", "compute-3"} {
		dir := c.processDir(h)
		t.Cleanup(func() { killRecorded(dir) })
	}
	ctx := context.Background()
	var ids []string
	for i := 0; i < 3; i++ {
		resp, err := c.api().CreateServers(ctx, api.CreateRequest{Name: fmt.Sprintf("evac-%d", i), Flavor: "m1.tiny", Count: 1, Host: "compute-1"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, serverIDs(resp)...)
	}
	c.mu.Lock()
	for _, id := range ids {
		c.requested[id] = "evacuate"
	}
	c.mu.Unlock()
	c.settleAll(time.Minute)
	stale := map[string]int{}
	for _, id := range ids {
		pid := recordedPID(t, c.processDir("compute-1"), "compute-1", id)
		if !processAlive(pid) {
			t.Fatalf("%s's process %d on compute-1 is not running", id, pid)
		}
		stale[id] = pid
	}

	// Nova refuses while the host is up.
	if code, body := c.nova("POST", "/servers/"+ids[0]+"/action", map[string]any{"evacuate": map[string]any{}}); code != http.StatusBadRequest {
		t.Fatalf("evacuate from an up host: %d %s", code, body)
	}
	c.agents["compute-1"].kill(t)
	c.waitState("compute-1", "down", 30*time.Second)
	down := true
	if _, err := c.api().UpdateService(ctx, "compute-1", api.ServiceUpdate{ForcedDown: &down}); err != nil {
		t.Fatal(err)
	}
	for id, pid := range stale {
		if !processAlive(pid) {
			t.Fatalf("%s's process %d died with its agent; the test needs it alive", id, pid)
		}
	}
	for _, id := range ids {
		if code, body := c.nova("POST", "/servers/"+id+"/action", map[string]any{"evacuate": map[string]any{}}); code != http.StatusOK {
			t.Fatalf("evacuate %s: %d %s", id, code, body)
		}
	}
	// /v1 shows an evacuating server ACTIVE with its task: wait for
	// each to have left compute-1 with no task.
	byID := map[string]api.ServerView{}
	testwait.Poll(t, 2*time.Minute, "every server evacuated", func() (bool, string) {
		for _, id := range ids {
			s, err := c.api().GetServer(ctx, id)
			if err != nil {
				return false, err.Error()
			}
			if s.Status == "ERROR" || s.Status != "ACTIVE" || s.TaskState != "" || s.Host == "compute-1" {
				return s.Status == "ERROR", fmt.Sprintf("%s is %s/%s on %s", id, s.Status, s.TaskState, s.Host)
			}
			byID[id] = *s
		}
		return true, ""
	})
	var migs []string
	for _, id := range ids {
		s := byID[id]
		if s.Status != "ACTIVE" || (s.Host != "compute-2" && s.Host != "compute-3") {
			t.Fatalf("%s after its evacuation: %s on %s", id, s.Status, s.Host)
		}
		if pid := recordedPID(t, c.processDir(s.Host), s.Host, id); !processAlive(pid) {
			t.Errorf("%s's process %d on %s is not running", id, pid, s.Host)
		}
		con := c.consumer(id)
		if con == nil || len(con.Allocations) != 1 || con.Allocations[agent.ProviderUUIDForHost(s.Host)].Resources["VCPU"] != 1 {
			t.Errorf("%s on %s holds %+v, want its flavor on its destination only", id, s.Host, con)
		}
		m := c.evacuationOf(id)
		if m.Status != etcdschema.MigrationDone || m.SourceHost != "compute-1" || m.DestHost != s.Host {
			t.Errorf("%s's evacuation: %+v", id, m)
		}
		migs = append(migs, m.UUID)
	}
	// The source's provider empties: each source allocation goes (the
	// cell conductor frees it) once its evacuation is done.
	testwait.Poll(t, 30*time.Second, "compute-1's provider empty, no evacuation holding it", func() (bool, string) {
		for _, m := range migs {
			if con := c.consumer(m); con != nil {
				return false, fmt.Sprintf("evacuation %s holds %v", m, con.Allocations)
			}
		}
		var p etcdschema.Provider
		resp, err := c.cli.Get(ctx, c.keys.Provider(agent.ProviderUUIDForHost("compute-1")))
		if err != nil || len(resp.Kvs) != 1 || etcdschema.Decode("p", resp.Kvs[0].Value, &p) != nil {
			return false, fmt.Sprintf("read compute-1's provider: %v", err)
		}
		return p.Usages["VCPU"] == 0 && p.Usages["MEMORY_MB"] == 0, fmt.Sprintf("compute-1 uses %v", p.Usages)
	})
	// compute-1's agent is dead: its report of what runs there (its
	// stale copies do) is its to correct when it comes back.
	if n := c.countPrefix(c.keys.HostInstances("compute-1")); n != len(ids) {
		t.Errorf("compute-1 reports %d instances while down, want its %d", n, len(ids))
	}

	// The stale copies run until compute-1's agent comes back.
	for id, pid := range stale {
		if !processAlive(pid) {
			t.Fatalf("%s's stale process %d died before its agent came back", id, pid)
		}
	}
	c.net.restart(c.agents["compute-1"])
	testwait.Poll(t, time.Minute, "compute-1's stale copies destroyed", func() (bool, string) {
		for id, pid := range stale {
			if processAlive(pid) {
				return false, fmt.Sprintf("%s's process %d still runs on compute-1", id, pid)
			}
			if _, err := os.Stat(filepath.Join(c.processDir("compute-1"), id+".json")); err == nil {
				return false, fmt.Sprintf("compute-1's driver still records %s", id)
			}
			if m := c.evacuationOf(id); m.Status != etcdschema.MigrationCompleted {
				return false, fmt.Sprintf("%s's evacuation is %s", id, m.Status)
			}
		}
		// The clean-up casts that waited for compute-1 end too.
		if n := c.countPrefix(c.keys.Builds("compute-1")); n != 0 {
			return false, fmt.Sprintf("%d casts left on compute-1", n)
		}
		return true, ""
	})
	up := false
	if _, err := c.api().UpdateService(ctx, "compute-1", api.ServiceUpdate{ForcedDown: &up}); err != nil {
		t.Fatal(err)
	}
	c.waitState("compute-1", "up", 30*time.Second)
	if n := c.countPrefix(c.keys.HostInstances("compute-1")); n != 0 {
		t.Errorf("compute-1 still reports %d instances after its agent came back", n)
	}
	for _, id := range ids {
		s := byID[id]
		if pid := recordedPID(t, c.processDir(s.Host), s.Host, id); !processAlive(pid) {
			t.Errorf("%s's process on %s died with the cleanup", id, s.Host)
		}
	}
	c.checkInvariants("evacuate")
}

// processDir is the process driver's state directory of host's agent.
func (c *mhCluster) processDir(host string) string { return filepath.Join(c.dir, host, "process") }

// nova calls the Nova API of a running server as the rendered admin at
// microversion 2.93 and returns the status and body.
func (c *mhCluster) nova(method, path string, body any) (int, string) {
	c.t.Helper()
	cl := c.api() // logs the admin in once
	b, err := json.Marshal(body)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, cl.BaseURL+"/v2.1"+path, bytes.NewReader(b))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", c.adminToken)
	req.Header.Set("X-OpenStack-Nova-API-Version", "2.93")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.https.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// evacuationOf reads server id's newest evacuation from etcd.
func (c *mhCluster) evacuationOf(id string) etcdschema.Migration {
	c.t.Helper()
	resp, err := c.cli.Get(context.Background(), c.keys.CellsPrefix(), clientv3.WithPrefix())
	if err != nil {
		c.t.Fatal(err)
	}
	var last etcdschema.Migration
	var lastRev int64
	for _, kv := range resp.Kvs {
		p, err := c.keys.ParseKey(string(kv.Key))
		if err != nil || p.Kind != etcdschema.KindMigration {
			continue
		}
		var m etcdschema.Migration
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
			c.t.Fatal(err)
		}
		if m.InstanceUUID == id && m.MigrationType == etcdschema.MigrationTypeEvacuation && kv.CreateRevision > lastRev {
			last, lastRev = m, kv.CreateRevision
		}
	}
	return last
}
