package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// novaText calls the Nova API with token at microversion mv and returns
// the status and the raw body; every other Nova helper of moveRig goes
// through it.
func (r *moveRig) novaText(token, mv, method, path string, body any) (int, string) {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			r.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(r.ctx, method, r.s.Endpoint("compute API")+"/v2.1"+path, rd)
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("X-OpenStack-Nova-API-Version", mv)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// forceDown sets host's compute service forced_down (os-services 2.53).
func (r *moveRig) forceDown(host string, down bool) {
	r.t.Helper()
	code, out := r.nova("GET", "/os-services?binary=nova-compute&host="+host, nil)
	svcs, _ := out["services"].([]any)
	if code != http.StatusOK || len(svcs) != 1 {
		r.t.Fatalf("find the service of %s: %d %v", host, code, out)
	}
	id := svcs[0].(map[string]any)["id"].(string)
	if code, out := r.nova("PUT", "/os-services/"+id, map[string]any{"forced_down": down}); code != http.StatusOK {
		r.t.Fatalf("force %s down=%v: %d %v", host, down, code, out)
	}
}

// evacuation waits for the server's evacuation to reach status.
func (r *moveRig) evacuation(id, status string) etcdschema.Migration {
	r.t.Helper()
	var mig etcdschema.Migration
	testwait.Poll(r.t, time.Minute, "evacuation of "+id+" "+status, func() (bool, string) {
		mig = r.migration(id)
		return mig.MigrationType == etcdschema.MigrationTypeEvacuation && mig.Status == status, mig.Status
	})
	return mig
}

// TestEvacuateAPI: evacuate's refusals and answers by microversion, as
// Nova 26's evacuate.py gives them (the server's host up, then forced
// down).
func TestEvacuateAPI(t *testing.T) {
	r := newMoveRig(t, 2, nil)
	id := r.boot("evac", "m1.tiny", "compute-1")
	const admin = "admin:admin"
	// A member of the server's own project (another project's gets
	// Nova's project-scoped 404 before any policy).
	member := "alice:" + r.server(id)["tenant_id"].(string)
	path := "/servers/" + id + "/action"
	for _, tc := range []struct {
		desc, token, mv, path string
		body                  any
		code                  int
		has                   string
	}{
		{"unknown server", admin, "2.93", "/servers/8d9e5c3a-0000-4000-8000-000000000000/action",
			map[string]any{"evacuate": map[string]any{}}, 404, "could not be found"},
		{"other project", "alice:demo", "2.93", path, map[string]any{"evacuate": map[string]any{}}, 404, "could not be found"},
		{"not admin", member, "2.93", path, map[string]any{"evacuate": map[string]any{}}, 403, "os_compute_api:os-evacuate"},
		{"source up", admin, "2.93", path, map[string]any{"evacuate": map[string]any{}}, 400,
			"Compute service of compute-1 is still in use."},
		{"unknown host", admin, "2.93", path, map[string]any{"evacuate": map[string]any{"host": "nowhere"}}, 404,
			"Compute host nowhere not found."},
		{"own host", admin, "2.93", path, map[string]any{"evacuate": map[string]any{"host": "compute-1"}}, 400,
			"The target host can't be the same one."},
		{"onSharedStorage required before 2.14", admin, "2.13", path, map[string]any{"evacuate": map[string]any{}}, 400,
			"'onSharedStorage' is a required property"},
		{"onSharedStorage gone in 2.14", admin, "2.14", path,
			map[string]any{"evacuate": map[string]any{"onSharedStorage": false}}, 400, "Additional properties are not allowed"},
		{"password on shared storage", admin, "2.13", path,
			map[string]any{"evacuate": map[string]any{"onSharedStorage": true, "adminPass": "x"}}, 400,
			"admin password can't be changed on existing disk"},
		{"force without a host", admin, "2.29", path, map[string]any{"evacuate": map[string]any{"force": true}}, 400,
			"Can't force to a non-provided destination"},
		{"force gone in 2.68", admin, "2.68", path,
			map[string]any{"evacuate": map[string]any{"host": "compute-2", "force": true}}, 400, "Additional properties are not allowed"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			code, body := r.novaText(tc.token, tc.mv, "POST", tc.path, tc.body)
			if code != tc.code || !strings.Contains(body, tc.has) {
				t.Errorf("%d %s, want %d with %q", code, body, tc.code, tc.has)
			}
		})
	}
	if m := r.migration(id); m.UUID != "" {
		t.Fatalf("a refused evacuate left a migration: %+v", m)
	}

	// Down (forced): before 2.14 the answer carries the password.
	r.forceDown("compute-1", true)
	code, body := r.novaText(admin, "2.1", "POST", path,
		map[string]any{"evacuate": map[string]any{"onSharedStorage": "False", "adminPass": "s3cret"}})
	if code != http.StatusOK || body != `{"adminPass": "s3cret"}` {
		t.Fatalf("evacuate at 2.1: %d %s", code, body)
	}
	srv := r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != "compute-2" {
		t.Fatalf("evacuated to %s, want compute-2", hostOf(srv))
	}
	// Evacuated servers are evacuable again only from a down host.
	code, body = r.novaText(admin, "2.93", "POST", path, map[string]any{"evacuate": nil})
	if code != http.StatusBadRequest || !strings.Contains(body, "Invalid input") {
		t.Errorf("evacuate null body: %d %s", code, body)
	}
	code, body = r.novaText(admin, "2.93", "POST", path, map[string]any{"evacuate": map[string]any{}})
	if code != http.StatusBadRequest || !strings.Contains(body, "Compute service of compute-2 is still in use.") {
		t.Errorf("evacuate from an up host: %d %s", code, body)
	}
}

// TestEvacuateMovesServerAndAllocation: with its host forced down, a
// server is rebuilt on another host; while the evacuation is in flight
// Placement holds the source under the migration's consumer, and once
// it is done only the destination's claim is left. The migration, the
// instance action and os-migrations say so as Nova's do.
func TestEvacuateMovesServerAndAllocation(t *testing.T) {
	r := newMoveRig(t, 3, nil)
	hosts := []string{"compute-1", "compute-2", "compute-3"}
	id := r.boot("evac", "m1.small", "compute-1")
	other := r.boot("stays", "m1.tiny", "compute-2")
	r.forceDown("compute-1", true)
	code, body := r.novaText("admin:admin", "2.93", "POST", "/servers/"+id+"/action",
		map[string]any{"evacuate": map[string]any{}})
	if code != http.StatusOK || body != "" {
		t.Fatalf("evacuate: %d %q", code, body)
	}
	srv := r.waitStatus(id, "ACTIVE")
	dest := hostOf(srv)
	if dest == "compute-1" {
		t.Fatal("evacuated onto its own down host")
	}
	// compute-1 is forced down with its agent running: the cell
	// conductor's clean-up cast reaches it, which destroys its copy and
	// completes the evacuation (done, then completed, as in Nova).
	mig := r.evacuation(id, etcdschema.MigrationCompleted)
	if mig.SourceHost != "compute-1" || mig.DestHost != dest {
		t.Errorf("migration %+v", mig)
	}
	want := map[string]usage{dest: flavorUsage(small), "compute-2": flavorUsage(tiny)}
	if dest == "compute-2" {
		want[dest] = usage{int64(small.VCPUs + tiny.VCPUs), int64(small.RAMMB + tiny.RAMMB), int64(small.DiskGB + tiny.DiskGB)}
	}
	r.checkUsages("the source freed, the destination held", hosts, want,
		map[string]map[string]usage{id: {dest: flavorUsage(small)}, mig.UUID: nil, other: {"compute-2": flavorUsage(tiny)}})
	testwait.Until(t, "the evacuation's mapping gone with its source allocation", func() bool { return !r.mapped(mig.UUID) })

	// The schedulers' view follows: the destination reports the server,
	// the source (its copy destroyed) no longer does.
	for _, h := range hosts {
		resp, err := r.s.cli.Get(r.ctx, r.s.keys.HostInstance(h, id), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if has := resp.Count == 1; has != (h == dest) {
			t.Errorf("host %s's instance info has the server: %v", h, has)
		}
	}

	code, out := r.nova("GET", "/servers/"+id+"/os-instance-actions/"+mig.RequestID, nil)
	if code != http.StatusOK {
		t.Fatalf("evacuate action: %d %v", code, out)
	}
	act := out["instanceAction"].(map[string]any)
	var events []string
	for _, e := range act["events"].([]any) {
		ev := e.(map[string]any)
		events = append(events, fmt.Sprintf("%v@%v:%v", ev["event"], ev["host"], ev["result"]))
	}
	wantEvents := []string{"compute_rebuild_instance@" + dest + ":Success", "rebuild_server@:Success"}
	if act["action"] != "evacuate" || fmt.Sprint(events) != fmt.Sprint(wantEvents) {
		t.Errorf("action %v events %v, want evacuate %v", act["action"], events, wantEvents)
	}
	code, out = r.nova("GET", "/os-migrations?migration_type=evacuation", nil)
	if ms, _ := out["migrations"].([]any); code != http.StatusOK || len(ms) != 1 ||
		ms[0].(map[string]any)["status"] != "completed" || ms[0].(map[string]any)["dest_compute"] != dest {
		t.Errorf("os-migrations: %d %v", code, out)
	}
	// Nova lists only live migrations in progress under the server.
	if code, out = r.nova("GET", "/servers/"+id+"/migrations", nil); code != http.StatusOK || len(out["migrations"].([]any)) != 0 {
		t.Errorf("server migrations: %d %v", code, out)
	}
}

// TestEvacuateRetriedOnAlternate: the destination the scheduler prefers
// fails the rebuild; the cell conductor claims the stored alternate and
// the server lands there, both attempts recorded.
func TestEvacuateRetriedOnAlternate(t *testing.T) {
	r := newMoveRig(t, 3, map[string]bool{"compute-2": true})
	hosts := []string{"compute-1", "compute-2", "compute-3"}
	id := r.boot("evac", "m1.tiny", "compute-1")
	filler := r.boot("filler", "m1.large", "compute-3") // compute-2 has the most room
	r.forceDown("compute-1", true)
	r.action(id, map[string]any{"evacuate": map[string]any{}}, http.StatusOK)
	srv := r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != "compute-3" {
		t.Fatalf("evacuated onto %s, want compute-3", hostOf(srv))
	}
	mig := r.evacuation(id, etcdschema.MigrationCompleted)
	if len(mig.Attempts) != 2 || mig.Attempts[0].Host != "compute-2" || mig.Attempts[0].Reason == "" ||
		mig.Attempts[1].Host != "compute-3" {
		t.Fatalf("attempts %+v, want compute-2 (failed) then compute-3", mig.Attempts)
	}
	large := api.DefaultFlavors()[3]
	r.checkUsages("evacuated on the alternate", hosts,
		map[string]usage{"compute-3": {int64(large.VCPUs + tiny.VCPUs), int64(large.RAMMB + tiny.RAMMB), int64(large.DiskGB + tiny.DiskGB)}},
		map[string]map[string]usage{id: {"compute-3": flavorUsage(tiny)}, mig.UUID: nil, filler: {"compute-3": flavorUsage(large)}})
}

// TestEvacuateExhaustedErrorsOnSource: every other host fails the
// rebuild; the evacuation fails with each attempt's reason, the server
// is ERROR on its (down) source, which holds its allocation again.
func TestEvacuateExhaustedErrorsOnSource(t *testing.T) {
	r := newMoveRig(t, 3, map[string]bool{"compute-2": true, "compute-3": true})
	hosts := []string{"compute-1", "compute-2", "compute-3"}
	id := r.boot("evac", "m1.tiny", "compute-1")
	r.forceDown("compute-1", true)
	r.action(id, map[string]any{"evacuate": map[string]any{}}, http.StatusOK)
	mig := r.evacuation(id, etcdschema.MigrationFailed)
	srv := r.waitStatus(id, "ERROR")
	if hostOf(srv) != "compute-1" || srv["OS-EXT-STS:task_state"] != nil {
		t.Errorf("failed evacuation left the server on %v, task %v", hostOf(srv), srv["OS-EXT-STS:task_state"])
	}
	msg, _ := srv["fault"].(map[string]any)["message"].(string)
	if len(mig.Attempts) != 2 || !strings.Contains(msg, "compute-2: ") || !strings.Contains(msg, "compute-3: ") {
		t.Errorf("attempts %+v, fault %q: want both hosts with their reasons", mig.Attempts, msg)
	}
	if r.mapped(mig.UUID) {
		t.Error("migration mapping left after the failed evacuation")
	}
	r.checkUsages("the source's allocation back on the instance", hosts, map[string]usage{"compute-1": flavorUsage(tiny)},
		map[string]map[string]usage{id: {"compute-1": flavorUsage(tiny)}, mig.UUID: nil})
}

// TestEvacuateNoValidHost: no host can take the server (the only other
// one is disabled): the evacuation ends in error at the scheduler and
// the server is ERROR on its source with its allocation.
func TestEvacuateNoValidHost(t *testing.T) {
	r := newMoveRig(t, 2, nil)
	id := r.boot("evac", "m1.tiny", "compute-1")
	r.forceDown("compute-1", true)
	code, out := r.nova("GET", "/os-services?binary=nova-compute&host=compute-2", nil)
	if code != http.StatusOK {
		t.Fatalf("find compute-2's service: %d %v", code, out)
	}
	sid := out["services"].([]any)[0].(map[string]any)["id"].(string)
	if code, out = r.nova("PUT", "/os-services/"+sid, map[string]any{"status": "disabled"}); code != http.StatusOK {
		t.Fatalf("disable compute-2: %d %v", code, out)
	}
	r.action(id, map[string]any{"evacuate": map[string]any{}}, http.StatusOK)
	mig := r.evacuation(id, etcdschema.MigrationError)
	srv := r.waitStatus(id, "ERROR")
	if hostOf(srv) != "compute-1" || !strings.Contains(mig.Error, "No valid host") {
		t.Errorf("server on %v, migration error %q", hostOf(srv), mig.Error)
	}
	r.checkUsages("the source's allocation back on the instance", []string{"compute-1", "compute-2"},
		map[string]usage{"compute-1": flavorUsage(tiny)},
		map[string]map[string]usage{id: {"compute-1": flavorUsage(tiny)}, mig.UUID: nil})

	// An ERROR server is evacuable too: forced (2.29) to compute-2,
	// enabled again. (A forced host skips the filters but not
	// Placement's, which leaves a disabled host out as it does for a
	// forced build: Nova's forced evacuate claims without the scheduler.)
	if code, out = r.nova("PUT", "/os-services/"+sid, map[string]any{"status": "enabled"}); code != http.StatusOK {
		t.Fatalf("enable compute-2: %d %v", code, out)
	}
	code, body := r.novaText("admin:admin", "2.29", "POST", "/servers/"+id+"/action",
		map[string]any{"evacuate": map[string]any{"host": "compute-2", "force": "true"}})
	if code != http.StatusOK {
		t.Fatalf("forced evacuate: %d %s", code, body)
	}
	srv = r.waitStatus(id, "ACTIVE")
	if forced := r.evacuation(id, etcdschema.MigrationCompleted); hostOf(srv) != "compute-2" || !forced.ForceHost {
		t.Errorf("forced evacuation: on %v, migration %+v", hostOf(srv), forced)
	}
	r.checkUsages("only the forced destination", []string{"compute-1", "compute-2"},
		map[string]usage{"compute-2": flavorUsage(tiny)}, map[string]map[string]usage{id: {"compute-2": flavorUsage(tiny)}})
}

// TestEvacuateHoldsBothWhileRebuilding: while the destination rebuilds
// (the fake driver's builds take a while), Placement counts the server
// on both hosts: the source under the migration's consumer, the
// destination under the instance; once done, only the destination.
func TestEvacuateHoldsBothWhileRebuilding(t *testing.T) {
	r := newMoveRigWith(t, 2, nil, func(cfg *configs.Config) { cfg.Agent.Fake.BuildTime = 2 * time.Second })
	hosts := []string{"compute-1", "compute-2"}
	id := r.boot("evac", "m1.tiny", "compute-1")
	r.forceDown("compute-1", true)
	r.action(id, map[string]any{"evacuate": map[string]any{"host": "compute-2"}}, http.StatusOK)
	var mig etcdschema.Migration
	testwait.Poll(t, 30*time.Second, "the rebuild cast to compute-2", func() (bool, string) {
		mig = r.migration(id)
		return mig.Status == etcdschema.MigrationPreMigrating, mig.Status
	})
	r.checkUsages("source and destination both held", hosts,
		map[string]usage{"compute-1": flavorUsage(tiny), "compute-2": flavorUsage(tiny)},
		map[string]map[string]usage{id: {"compute-2": flavorUsage(tiny)}, mig.UUID: {"compute-1": flavorUsage(tiny)}})
	if srv := r.server(id); srv["status"] != "REBUILD" || srv["OS-EXT-STS:task_state"] != "rebuilding" {
		t.Errorf("while rebuilding: %v/%v, want REBUILD/rebuilding", srv["status"], srv["OS-EXT-STS:task_state"])
	}
	r.waitStatus(id, "ACTIVE")
	r.checkUsages("only the destination", hosts, map[string]usage{"compute-2": flavorUsage(tiny)},
		map[string]map[string]usage{id: {"compute-2": flavorUsage(tiny)}, mig.UUID: nil})
}
