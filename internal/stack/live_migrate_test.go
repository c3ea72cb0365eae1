package stack

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// newLiveRig is newMoveRig with each host's agent config changed by
// change (the fake driver's live migration time and failures).
func newLiveRig(t *testing.T, hosts int, change func(a *configs.Agent)) *moveRig {
	t.Helper()
	cfg := configs.Defaults()
	cfg.EnableAllRoles()
	cfg.Etcd.Embedded = nil
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	s := New(cfg, hclog.NewNullLogger())
	s.Attach(etcdtest.Client(t))
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	if err := Dev(DevOptions{Hosts: hosts, Cells: 1, ChangeAgent: change, DataDir: t.TempDir()})(ctx, s); err != nil {
		t.Fatalf("start dev: %v", err)
	}
	r := &moveRig{t: t, ctx: ctx, s: s, c: api.NewClient(s.Endpoint("compute API"))}
	testwait.Poll(t, 30*time.Second, "every host up", func() (bool, string) {
		hs, err := r.c.ListHosts(ctx)
		up := 0
		for _, h := range hs {
			if h.State == "up" {
				up++
			}
		}
		return err == nil && up == hosts, fmt.Sprintf("%d up (%v)", up, err)
	})
	return r
}

// novaAt calls the Nova API as admin at microversion mv.
func (r *moveRig) novaAt(mv, method, path string, body any) (int, map[string]any) {
	r.t.Helper()
	return r.novaAs("admin:admin", mv, method, path, body)
}

// hostInstance says whether host's instance info lists uuid.
func (r *moveRig) hostInstance(host, uuid string) bool {
	r.t.Helper()
	resp, err := r.s.cli.Get(r.ctx, r.s.keys.HostInstance(host, uuid), clientv3.WithCountOnly())
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Count == 1
}

// waitMigration waits until id's newest migration is in status.
func (r *moveRig) waitMigration(id, status string) etcdschema.Migration {
	r.t.Helper()
	var m etcdschema.Migration
	testwait.Poll(r.t, time.Minute, "migration of "+id+" "+status, func() (bool, string) {
		m = r.migration(id)
		return m.Status == status, fmt.Sprintf("%s (%s)", m.Status, m.Error)
	})
	return m
}

var liveAuto = map[string]any{"os-migrateLive": map[string]any{"host": nil, "block_migration": "auto"}}

// TestLiveMigrate moves a running server through the Nova API and
// checks Placement before, during (the source held by the migration's
// consumer, the destination by the instance, while the server shows
// MIGRATING) and after (the destination only), the instance info moved
// with it, and the instance action Nova names live-migration.
func TestLiveMigrate(t *testing.T) {
	r := newLiveRig(t, 3, func(a *configs.Agent) { a.Fake.LiveMigrationTime = 4 * time.Second })
	hosts := []string{"compute-1", "compute-2", "compute-3"}
	id := r.boot("runner", "m1.tiny", "compute-1")
	r.checkUsages("before", hosts, map[string]usage{"compute-1": flavorUsage(tiny)},
		map[string]map[string]usage{id: {"compute-1": flavorUsage(tiny)}})

	r.action(id, liveAuto, http.StatusAccepted)
	mig := r.waitMigration(id, etcdschema.MigrationRunning)
	dest := mig.DestHost
	if dest == "compute-1" || dest == "" || mig.MigrationType != etcdschema.MigrationTypeLiveMigration ||
		mig.BlockMigration != "auto" {
		t.Fatalf("running migration %+v", mig)
	}
	srv := r.server(id)
	if srv["status"] != "MIGRATING" || srv["OS-EXT-STS:task_state"] != "migrating" || hostOf(srv) != "compute-1" {
		t.Errorf("during the move: %v/%v on %v, want MIGRATING/migrating on compute-1", srv["status"],
			srv["OS-EXT-STS:task_state"], hostOf(srv))
	}
	r.checkUsages("during: source and destination both held", hosts,
		map[string]usage{"compute-1": flavorUsage(tiny), dest: flavorUsage(tiny)},
		map[string]map[string]usage{id: {dest: flavorUsage(tiny)}, mig.UUID: {"compute-1": flavorUsage(tiny)}})
	if m := r.migration(id); m.Status != etcdschema.MigrationRunning {
		t.Fatalf("the move ended (%s) before the usages during it were read: raise LiveMigrationTime", m.Status)
	}

	srv = r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != dest || srv["OS-EXT-STS:task_state"] != nil {
		t.Fatalf("after the move: on %v, task %v; want %s", hostOf(srv), srv["OS-EXT-STS:task_state"], dest)
	}
	mig = r.waitMigration(id, etcdschema.MigrationCompleted)
	r.checkUsages("after: the destination only", hosts, map[string]usage{dest: flavorUsage(tiny)},
		map[string]map[string]usage{id: {dest: flavorUsage(tiny)}, mig.UUID: nil})
	if r.mapped(mig.UUID) {
		t.Error("migration mapping left after the live migration")
	}
	if r.hostInstance("compute-1", id) || !r.hostInstance(dest, id) {
		t.Errorf("instance info: on compute-1 %v, on %s %v; want it moved", r.hostInstance("compute-1", id),
			dest, r.hostInstance(dest, id))
	}
	code, out := r.nova("GET", "/servers/"+id+"/os-instance-actions/"+mig.RequestID, nil)
	if code != http.StatusOK {
		t.Fatalf("live migration action: %d %v", code, out)
	}
	act := out["instanceAction"].(map[string]any)
	var events []string
	for _, e := range act["events"].([]any) {
		ev := e.(map[string]any)
		events = append(events, fmt.Sprintf("%v@%v:%v", ev["event"], ev["host"], ev["result"]))
	}
	want := []string{"compute_live_migration@compute-1:Success", "compute_pre_live_migration@" + dest + ":Success",
		"compute_check_can_live_migrate_destination@" + dest + ":Success", "conductor_live_migrate_instance@:Success"}
	if act["action"] != "live-migration" || fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("action %v events %v, want live-migration %v", act["action"], events, want)
	}
}

// TestLiveMigratePreCheckRetries: the two hosts the scheduler prefers
// fail the destination's pre-check; each failure goes back to the
// superconductor, which claims the next alternate, and the server lands
// on the last host with every attempt recorded. A second server, whose
// every other host fails, ends the migration in error with each reason
// and stays ACTIVE on its source with its allocation.
func TestLiveMigratePreCheckRetries(t *testing.T) {
	failing := map[string]bool{"compute-2": true, "compute-3": true}
	r := newLiveRig(t, 4, func(a *configs.Agent) { a.Fake.FailLiveCheck = failing[a.Host] })
	hosts := []string{"compute-1", "compute-2", "compute-3", "compute-4"}
	// compute-4 has the least room, so the failing hosts come first.
	filler := r.boot("filler", "m1.large", "compute-4")
	big := flavorUsage(large())
	id := r.boot("runner", "m1.tiny", "compute-1")
	r.action(id, liveAuto, http.StatusAccepted)
	mig := r.waitMigration(id, etcdschema.MigrationCompleted)
	srv := r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != "compute-4" {
		t.Fatalf("landed on %s, want compute-4", hostOf(srv))
	}
	if len(mig.Attempts) != 3 || !failing[mig.Attempts[0].Host] || !failing[mig.Attempts[1].Host] ||
		mig.Attempts[0].Reason == "" || mig.Attempts[1].Reason == "" || mig.Attempts[2].Host != "compute-4" {
		t.Fatalf("attempts %+v, want compute-2 and compute-3 failed, then compute-4", mig.Attempts)
	}
	both := usage{big.vcpu + int64(tiny.VCPUs), big.ram + int64(tiny.RAMMB), big.disk + int64(tiny.DiskGB)}
	r.checkUsages("after the retried live migration", hosts, map[string]usage{"compute-4": both},
		map[string]map[string]usage{id: {"compute-4": flavorUsage(tiny)}, mig.UUID: nil, filler: {"compute-4": big}})

	// Pinned to a failing host: nowhere else to go, error.
	code, out := r.nova("POST", "/servers/"+id+"/action",
		map[string]any{"os-migrateLive": map[string]any{"host": "compute-2", "block_migration": false}})
	if code != http.StatusAccepted {
		t.Fatalf("live migrate to compute-2: %d %v", code, out)
	}
	var m etcdschema.Migration
	testwait.Poll(t, time.Minute, "the pinned migration in error", func() (bool, string) {
		m = r.migration(id)
		return m.UUID != mig.UUID && m.Status == etcdschema.MigrationError, m.Status
	})
	if len(m.Attempts) != 1 || m.Attempts[0].Host != "compute-2" || !strings.Contains(m.Error, "compute-2") {
		t.Errorf("pinned migration: attempts %+v, error %q", m.Attempts, m.Error)
	}
	srv = r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != "compute-4" || srv["OS-EXT-STS:task_state"] != nil {
		t.Errorf("after the failed pinned move: on %v, task %v", hostOf(srv), srv["OS-EXT-STS:task_state"])
	}
	r.checkUsages("the failed pinned move changed nothing", hosts, map[string]usage{"compute-4": both},
		map[string]map[string]usage{id: {"compute-4": flavorUsage(tiny)}, m.UUID: nil})
}

// TestLiveMigrateExhausted: every other host fails the pre-check; the
// migration ends in error with both reasons, the server ACTIVE on its
// source with its allocation.
func TestLiveMigrateExhausted(t *testing.T) {
	r := newLiveRig(t, 3, func(a *configs.Agent) { a.Fake.FailLiveCheck = a.Host != "compute-1" })
	hosts := []string{"compute-1", "compute-2", "compute-3"}
	id := r.boot("runner", "m1.tiny", "compute-1")
	r.action(id, liveAuto, http.StatusAccepted)
	mig := r.waitMigration(id, etcdschema.MigrationError)
	if len(mig.Attempts) != 2 || mig.Attempts[0].Reason == "" || mig.Attempts[1].Reason == "" ||
		!strings.Contains(mig.Error, mig.Attempts[0].Host) || !strings.Contains(mig.Error, mig.Attempts[1].Host) {
		t.Errorf("attempts %+v error %q, want both hosts with their reasons", mig.Attempts, mig.Error)
	}
	srv := r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != "compute-1" || srv["OS-EXT-STS:task_state"] != nil {
		t.Errorf("after the failed move: on %v, task %v", hostOf(srv), srv["OS-EXT-STS:task_state"])
	}
	if r.mapped(mig.UUID) {
		t.Error("migration mapping left after the error")
	}
	r.checkUsages("the failed move left the source as it was", hosts, map[string]usage{"compute-1": flavorUsage(tiny)},
		map[string]map[string]usage{id: {"compute-1": flavorUsage(tiny)}, mig.UUID: nil})
}

// TestLiveMigrateRollsBack: a destination that fails to start the guest
// (forced there at 2.30, the scheduler's filters skipped), and a source
// that fails to hand over, each end the migration failed with the
// server ACTIVE on its source, the destination's claim freed and the
// source's allocation back with the instance.
func TestLiveMigrateRollsBack(t *testing.T) {
	r := newLiveRig(t, 3, func(a *configs.Agent) {
		a.Fake.FailLiveOut = a.Host == "compute-1"
		a.Fake.FailLiveStart = a.Host == "compute-3"
	})
	hosts := []string{"compute-1", "compute-2", "compute-3"}
	stuck := r.boot("stuck", "m1.tiny", "compute-1")
	starter := r.boot("starter", "m1.small", "compute-2")
	held := map[string]usage{"compute-1": flavorUsage(tiny), "compute-2": flavorUsage(small)}

	r.action(stuck, map[string]any{"os-migrateLive": map[string]any{"host": "compute-2", "block_migration": "auto"}},
		http.StatusAccepted)
	mig := r.waitMigration(stuck, etcdschema.MigrationFailed)
	if mig.DestHost != "compute-2" || mig.Error == "" {
		t.Errorf("hand-over failure: %+v", mig)
	}
	if srv := r.waitStatus(stuck, "ACTIVE"); hostOf(srv) != "compute-1" || srv["OS-EXT-STS:task_state"] != nil {
		t.Errorf("after the rollback: on %v, task %v", hostOf(srv), srv["OS-EXT-STS:task_state"])
	}

	code, out := r.novaAt("2.30", "POST", "/servers/"+starter+"/action",
		map[string]any{"os-migrateLive": map[string]any{"host": "compute-3", "block_migration": "auto", "force": true}})
	if code != http.StatusAccepted {
		t.Fatalf("forced live migrate: %d %v", code, out)
	}
	mig2 := r.waitMigration(starter, etcdschema.MigrationFailed)
	if !mig2.ForceHost || mig2.DestHost != "compute-3" || !strings.Contains(mig2.Error, "compute-3") {
		t.Errorf("start failure: %+v", mig2)
	}
	if srv := r.waitStatus(starter, "ACTIVE"); hostOf(srv) != "compute-2" {
		t.Errorf("after the rollback: on %v", hostOf(srv))
	}
	r.checkUsages("both rolled back", hosts, held, map[string]map[string]usage{
		stuck: {"compute-1": flavorUsage(tiny)}, starter: {"compute-2": flavorUsage(small)}, mig.UUID: nil, mig2.UUID: nil})
}

func large() etcdschema.Flavor { return api.DefaultFlavors()[3] }

// TestLiveMigrateAbort aborts a running live migration (DELETE
// /servers/{id}/migrations/{mid}, 2.24) while the destination starts the
// guest: the destination's transaction loses to the abort, it rolls
// back, and the migration ends cancelled with the server ACTIVE on its
// source holding only its source allocation. Aborting again is Nova's
// 409 (the server is no longer migrating).
func TestLiveMigrateAbort(t *testing.T) {
	r := newLiveRig(t, 2, func(a *configs.Agent) { a.Fake.LiveMigrationTime = 3 * time.Second })
	hosts := []string{"compute-1", "compute-2"}
	id := r.boot("runner", "m1.tiny", "compute-1")
	r.action(id, liveAuto, http.StatusAccepted)
	mig := r.waitMigration(id, etcdschema.MigrationRunning)
	code, out := r.nova("GET", "/servers/"+id+"/migrations", nil)
	list, _ := out["migrations"].([]any)
	if code != http.StatusOK || len(list) != 1 {
		t.Fatalf("in-progress migrations: %d %v", code, out)
	}
	mid := fmt.Sprint(list[0].(map[string]any)["id"])
	if code, out := r.novaAt("2.24", "DELETE", "/servers/"+id+"/migrations/"+mid, nil); code != http.StatusAccepted {
		t.Fatalf("abort: %d %v", code, out)
	}
	m := r.waitMigration(id, etcdschema.MigrationCancelled)
	if m.AbortRequestID == "" || !strings.Contains(m.Error, "aborted") {
		t.Errorf("cancelled migration: %+v", m)
	}
	srv := r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != "compute-1" || srv["OS-EXT-STS:task_state"] != nil {
		t.Errorf("after the abort: on %v, task %v", hostOf(srv), srv["OS-EXT-STS:task_state"])
	}
	r.checkUsages("the abort gave the source back", hosts, map[string]usage{"compute-1": flavorUsage(tiny)},
		map[string]map[string]usage{id: {"compute-1": flavorUsage(tiny)}, mig.UUID: nil})
	if r.hostInstance("compute-2", id) {
		t.Error("the destination lists the aborted server")
	}
	code, out = r.novaAt("2.24", "DELETE", "/servers/"+id+"/migrations/"+mid, nil)
	if code != http.StatusConflict || !strings.Contains(fmt.Sprint(out), "Instance "+id+" is in an invalid state for 'abort live migration'") { // Nova 26, recorded
		t.Errorf("abort again: %d %v", code, out)
	}
}

// TestLiveMigrateForceComplete: a live migration whose guest would take
// a minute to converge (the fake's live_migration_time) completes at
// once when forced (POST /servers/{id}/migrations/{mid}/action
// force_complete, 2.22); forcing it again once done is Nova's 409 (the
// server is no longer migrating).
func TestLiveMigrateForceComplete(t *testing.T) {
	r := newLiveRig(t, 2, func(a *configs.Agent) { a.Fake.LiveMigrationTime = time.Minute })
	hosts := []string{"compute-1", "compute-2"}
	id := r.boot("runner", "m1.tiny", "compute-1")
	r.action(id, liveAuto, http.StatusAccepted)
	mig := r.waitMigration(id, etcdschema.MigrationRunning)
	_, out := r.nova("GET", "/servers/"+id+"/migrations", nil)
	list, _ := out["migrations"].([]any)
	if len(list) != 1 {
		t.Fatalf("in-progress migrations: %v", out)
	}
	mid := fmt.Sprint(list[0].(map[string]any)["id"])
	forced := time.Now()
	force := map[string]any{"force_complete": nil}
	if code, out := r.novaAt("2.22", "POST", "/servers/"+id+"/migrations/"+mid+"/action", force); code != http.StatusAccepted {
		t.Fatalf("force_complete: %d %v", code, out)
	}
	r.waitMigration(id, etcdschema.MigrationCompleted)
	if took := time.Since(forced); took > 30*time.Second {
		t.Errorf("the forced migration took %s, as long as unforced", took)
	}
	srv := r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != "compute-2" {
		t.Errorf("forced migration ended on %v", hostOf(srv))
	}
	r.checkUsages("after the forced migration", hosts, map[string]usage{"compute-2": flavorUsage(tiny)},
		map[string]map[string]usage{id: {"compute-2": flavorUsage(tiny)}, mig.UUID: nil})
	code, out := r.novaAt("2.22", "POST", "/servers/"+id+"/migrations/"+mid+"/action", force)
	if code != http.StatusConflict || !strings.Contains(fmt.Sprint(out), "Instance "+id+" is in an invalid state for 'force_complete'") { // Nova 26, recorded
		t.Errorf("force_complete once done: %d %v", code, out)
	}
}
