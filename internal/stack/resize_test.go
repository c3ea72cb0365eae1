package stack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// moveRig is a dev stack of one cell for the cold-move tests, with
// helpers to drive the Nova API and read Placement.
type moveRig struct {
	t   *testing.T
	ctx context.Context
	s   *Stack
	c   *api.Client
}

func newMoveRig(t *testing.T, hosts int, fail map[string]bool) *moveRig {
	t.Helper()
	return newMoveRigWith(t, hosts, fail, nil)
}

// newMoveRigWith is newMoveRig with a change to the config first.
func newMoveRigWith(t *testing.T, hosts int, fail map[string]bool, change func(*configs.Config)) *moveRig {
	t.Helper()
	cfg := configs.Defaults()
	cfg.EnableAllRoles()
	if change != nil {
		change(cfg)
	}
	cfg.Etcd.Embedded = nil
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	s := New(cfg, hclog.NewNullLogger())
	s.Attach(etcdtest.Client(t))
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	if err := Dev(DevOptions{Hosts: hosts, Cells: 1, FailHosts: fail, DataDir: t.TempDir()})(ctx, s); err != nil {
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

// nova calls the Nova API as noauth2's admin at the latest microversion.
func (r *moveRig) nova(method, path string, body any) (int, map[string]any) {
	r.t.Helper()
	return r.novaAs("admin:admin", "latest", method, path, body)
}

func (r *moveRig) action(id string, body any, want int) {
	r.t.Helper()
	if code, out := r.nova("POST", "/servers/"+id+"/action", body); code != want {
		r.t.Fatalf("action %v on %s: %d %v, want %d", body, id, code, out, want)
	}
}

// boot makes a server of flavor on host and waits until it is ACTIVE.
func (r *moveRig) boot(name, flavor, host string) string {
	r.t.Helper()
	resp, err := r.c.CreateServers(r.ctx, api.CreateRequest{Name: name, Flavor: flavor, Count: 1, Host: host})
	if err != nil {
		r.t.Fatal(err)
	}
	id := resp.Servers[0].ID
	r.waitStatus(id, "ACTIVE")
	return id
}

// server is the Nova view of id.
func (r *moveRig) server(id string) map[string]any {
	r.t.Helper()
	code, out := r.nova("GET", "/servers/"+id, nil)
	if code != http.StatusOK {
		r.t.Fatalf("show %s: %d %v", id, code, out)
	}
	return out["server"].(map[string]any)
}

func (r *moveRig) waitStatus(id, want string) map[string]any {
	r.t.Helper()
	var srv map[string]any
	testwait.Poll(r.t, time.Minute, id+" "+want, func() (bool, string) {
		srv = r.server(id)
		st := srv["status"]
		if st == "ERROR" && want != "ERROR" {
			r.t.Fatalf("%s went ERROR: %v", id, srv["fault"])
		}
		return st == want, fmt.Sprintf("%v/%v on %v", st, srv["OS-EXT-STS:task_state"], srv["OS-EXT-SRV-ATTR:host"])
	})
	return srv
}

func hostOf(srv map[string]any) string { return srv["OS-EXT-SRV-ATTR:host"].(string) }

// migration reads the instance's migration record from etcd.
func (r *moveRig) migration(id string) etcdschema.Migration {
	r.t.Helper()
	resp, err := r.s.cli.Get(r.ctx, r.s.keys.Migrations("cell1"), clientv3.WithPrefix())
	if err != nil {
		r.t.Fatal(err)
	}
	var last etcdschema.Migration
	var lastRev int64
	for _, kv := range resp.Kvs {
		var m etcdschema.Migration
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
			r.t.Fatal(err)
		}
		if m.InstanceUUID == id && kv.CreateRevision > lastRev {
			last, lastRev = m, kv.CreateRevision
		}
	}
	return last
}

// mapped says whether migration's mapping (which keeps the leader off
// its consumer) exists.
func (r *moveRig) mapped(migration string) bool {
	r.t.Helper()
	resp, err := r.s.cli.Get(r.ctx, r.s.keys.MigrationMapping(migration), clientv3.WithCountOnly())
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Count == 1
}

// usage is what a host's provider has in use: VCPU, MEMORY_MB, DISK_GB.
type usage struct{ vcpu, ram, disk int64 }

func flavorUsage(f etcdschema.Flavor) usage {
	return usage{int64(f.VCPUs), int64(f.RAMMB), int64(f.DiskGB)}
}

// checkUsages waits until Placement shows exactly want on every host
// and exactly the consumers' allocations given (consumer → host → usage;
// a consumer absent from consumers must hold nothing it names).
func (r *moveRig) checkUsages(what string, hosts []string, want map[string]usage, consumers map[string]map[string]usage) {
	r.t.Helper()
	testwait.Poll(r.t, 30*time.Second, what, func() (bool, string) {
		for _, h := range hosts {
			p, err := r.s.placement.Provider(r.ctx, agent.ProviderUUIDForHost(h))
			if err != nil {
				return false, err.Error()
			}
			got := usage{p.Usages["VCPU"], p.Usages["MEMORY_MB"], p.Usages["DISK_GB"]}
			if got != want[h] {
				return false, fmt.Sprintf("%s uses %+v, want %+v", h, got, want[h])
			}
		}
		for consumer, byHost := range consumers {
			c, err := r.s.placement.GetAllocations(r.ctx, consumer)
			if errors.Is(err, placement.ErrNotFound) {
				if len(byHost) == 0 {
					continue
				}
				return false, fmt.Sprintf("consumer %s holds nothing, want %v", consumer, byHost)
			}
			if err != nil {
				return false, err.Error()
			}
			if len(c.Allocations) != len(byHost) {
				return false, fmt.Sprintf("consumer %s holds %v, want %v", consumer, c.Allocations, byHost)
			}
			for h, u := range byHost {
				a := c.Allocations[agent.ProviderUUIDForHost(h)].Resources
				if got := (usage{a["VCPU"], a["MEMORY_MB"], a["DISK_GB"]}); got != u {
					return false, fmt.Sprintf("consumer %s holds %+v on %s, want %+v", consumer, got, h, u)
				}
			}
		}
		return true, ""
	})
}

var (
	tiny   = api.DefaultFlavors()[0]
	small  = api.DefaultFlavors()[1]
	medium = api.DefaultFlavors()[2]
)

// TestResizeConfirmRevertAndMigrate drives the cold moves through the
// Nova API on a dev stack of three hosts and checks Placement at every
// step: while a resize waits in VERIFY_RESIZE the source's allocation
// is held by the migration's consumer and the destination's by the
// instance, both counted; confirm frees the source; revert frees the
// destination and gives the instance its source allocation and flavor
// back; a cold migration lands on another host with the same flavor.
func TestResizeConfirmRevertAndMigrate(t *testing.T) {
	r := newMoveRig(t, 3, nil)
	hosts := []string{"compute-1", "compute-2", "compute-3"}
	id := r.boot("mover", "m1.tiny", "compute-1")
	r.checkUsages("the boot's claim", hosts, map[string]usage{"compute-1": flavorUsage(tiny)},
		map[string]map[string]usage{id: {"compute-1": flavorUsage(tiny)}})

	// Resize to m1.small, then confirm.
	r.action(id, map[string]any{"resize": map[string]any{"flavorRef": "2"}}, http.StatusAccepted)
	srv := r.waitStatus(id, "VERIFY_RESIZE")
	dest := hostOf(srv)
	if dest == "compute-1" {
		t.Fatalf("resized onto its own host without allow_resize_to_same_host")
	}
	if fl := srv["flavor"].(map[string]any)["original_name"]; fl != "m1.small" {
		t.Errorf("flavor during VERIFY_RESIZE %v, want m1.small", fl)
	}
	mig := r.migration(id)
	if mig.Status != etcdschema.MigrationFinished || mig.SourceHost != "compute-1" || mig.DestHost != dest ||
		mig.MigrationType != etcdschema.MigrationTypeResize {
		t.Fatalf("migration while VERIFY_RESIZE: %+v", mig)
	}
	r.checkUsages("source held by the migration, destination by the instance", hosts,
		map[string]usage{"compute-1": flavorUsage(tiny), dest: flavorUsage(small)},
		map[string]map[string]usage{id: {dest: flavorUsage(small)}, mig.UUID: {"compute-1": flavorUsage(tiny)}})
	if !r.mapped(mig.UUID) {
		t.Error("no migration mapping while the move holds the source")
	}
	r.action(id, map[string]any{"confirmResize": nil}, http.StatusNoContent)
	srv = r.waitStatus(id, "ACTIVE")
	if r.mapped(mig.UUID) {
		t.Error("migration mapping left after the confirm")
	}
	if hostOf(srv) != dest {
		t.Fatalf("confirmed on %s, want %s", hostOf(srv), dest)
	}
	r.checkUsages("confirm freed the source", hosts, map[string]usage{dest: flavorUsage(small)},
		map[string]map[string]usage{id: {dest: flavorUsage(small)}, mig.UUID: nil})
	if m := r.migration(id); m.Status != etcdschema.MigrationConfirmed {
		t.Errorf("migration after confirm: %s", m.Status)
	}

	// Resize to m1.medium, then revert: back on dest with m1.small.
	r.action(id, map[string]any{"resize": map[string]any{"flavorRef": "3"}}, http.StatusAccepted)
	srv = r.waitStatus(id, "VERIFY_RESIZE")
	dest2 := hostOf(srv)
	mig2 := r.migration(id)
	if dest2 == dest || mig2.UUID == mig.UUID {
		t.Fatalf("second resize: on %s, migration %+v", dest2, mig2)
	}
	r.checkUsages("second resize in flight", hosts,
		map[string]usage{dest: flavorUsage(small), dest2: flavorUsage(medium)},
		map[string]map[string]usage{id: {dest2: flavorUsage(medium)}, mig2.UUID: {dest: flavorUsage(small)}})
	r.action(id, map[string]any{"revertResize": nil}, http.StatusAccepted)
	srv = r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != dest {
		t.Fatalf("reverted onto %s, want %s", hostOf(srv), dest)
	}
	if fl := srv["flavor"].(map[string]any)["original_name"]; fl != "m1.small" {
		t.Errorf("flavor after revert %v, want m1.small", fl)
	}
	r.checkUsages("revert freed the destination", hosts, map[string]usage{dest: flavorUsage(small)},
		map[string]map[string]usage{id: {dest: flavorUsage(small)}, mig2.UUID: nil})
	if m := r.migration(id); m.Status != etcdschema.MigrationReverted || r.mapped(m.UUID) {
		t.Errorf("migration after revert: %s, mapped %v", m.Status, r.mapped(m.UUID))
	}

	// Cold migrate: same flavor, another host, VERIFY_RESIZE, confirm.
	r.action(id, map[string]any{"migrate": nil}, http.StatusAccepted)
	srv = r.waitStatus(id, "VERIFY_RESIZE")
	dest3 := hostOf(srv)
	mig3 := r.migration(id)
	if dest3 == dest || mig3.MigrationType != etcdschema.MigrationTypeMigration {
		t.Fatalf("migrate: on %s, migration %+v", dest3, mig3)
	}
	r.checkUsages("cold migration in flight", hosts,
		map[string]usage{dest: flavorUsage(small), dest3: flavorUsage(small)},
		map[string]map[string]usage{id: {dest3: flavorUsage(small)}, mig3.UUID: {dest: flavorUsage(small)}})
	r.action(id, map[string]any{"confirmResize": nil}, http.StatusNoContent)
	r.waitStatus(id, "ACTIVE")
	r.checkUsages("migration confirmed", hosts, map[string]usage{dest3: flavorUsage(small)},
		map[string]map[string]usage{id: {dest3: flavorUsage(small)}, mig3.UUID: nil})

	// Every move is an instance action with its steps as events, as in
	// Nova 26 (compute/testdata/nova_moves.json).
	code, out := r.nova("GET", "/servers/"+id+"/os-instance-actions", nil)
	if code != http.StatusOK {
		t.Fatalf("instance actions: %d %v", code, out)
	}
	var names []string
	for _, a := range out["instanceActions"].([]any) {
		names = append(names, a.(map[string]any)["action"].(string))
	}
	want := []string{"confirmResize", "migrate", "revertResize", "resize", "confirmResize", "resize", "create"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("instance actions %v, want %v", names, want)
	}
	code, out = r.nova("GET", "/servers/"+id+"/os-instance-actions/"+mig.RequestID, nil)
	if code != http.StatusOK {
		t.Fatalf("resize action: %d %v", code, out)
	}
	var events []string
	for _, e := range out["instanceAction"].(map[string]any)["events"].([]any) {
		ev := e.(map[string]any)
		events = append(events, fmt.Sprintf("%v@%v:%v", ev["event"], ev["host"], ev["result"]))
	}
	wantEvents := []string{"compute_finish_resize@" + dest + ":Success", "compute_resize_instance@compute-1:Success",
		"compute_prep_resize@" + dest + ":Success", "conductor_migrate_server@:Success"}
	if fmt.Sprint(events) != fmt.Sprint(wantEvents) {
		t.Errorf("resize events %v, want %v", events, wantEvents)
	}
}

// TestResizeRetriedOnAlternate: the destination the scheduler prefers
// (compute-2: most room, its fake driver failing) fails the move's prep,
// and the cell conductor claims the stored alternate (compute-3) and
// moves the server there; the migration records both attempts.
func TestResizeRetriedOnAlternate(t *testing.T) {
	r := newMoveRig(t, 3, map[string]bool{"compute-2": true})
	hosts := []string{"compute-1", "compute-2", "compute-3"}
	id := r.boot("mover", "m1.tiny", "compute-1")
	filler := r.boot("filler", "m1.large", "compute-3") // compute-2 has the most room
	r.action(id, map[string]any{"resize": map[string]any{"flavorRef": "2"}}, http.StatusAccepted)
	srv := r.waitStatus(id, "VERIFY_RESIZE")
	if hostOf(srv) != "compute-3" {
		t.Fatalf("resized onto %s, want compute-3", hostOf(srv))
	}
	mig := r.migration(id)
	if len(mig.Attempts) != 2 || mig.Attempts[0].Host != "compute-2" || mig.Attempts[0].Reason == "" ||
		mig.Attempts[1].Host != "compute-3" {
		t.Fatalf("attempts %+v, want compute-2 (failed) then compute-3", mig.Attempts)
	}
	large := api.DefaultFlavors()[3]
	r.checkUsages("retried resize in flight", hosts,
		map[string]usage{"compute-1": flavorUsage(tiny),
			"compute-3": {int64(large.VCPUs + small.VCPUs), int64(large.RAMMB + small.RAMMB), int64(large.DiskGB + small.DiskGB)}},
		map[string]map[string]usage{id: {"compute-3": flavorUsage(small)}, mig.UUID: {"compute-1": flavorUsage(tiny)},
			filler: {"compute-3": flavorUsage(large)}})
}

// TestResizeExhaustedStaysOnSource: every other host fails the move's
// prep; the migration ends in error with each attempt's reason and the
// server is ACTIVE on its source with its old flavor and allocation.
func TestResizeExhaustedStaysOnSource(t *testing.T) {
	r := newMoveRig(t, 3, map[string]bool{"compute-2": true, "compute-3": true})
	hosts := []string{"compute-1", "compute-2", "compute-3"}
	id := r.boot("mover", "m1.tiny", "compute-1")
	r.action(id, map[string]any{"resize": map[string]any{"flavorRef": "2"}}, http.StatusAccepted)
	var mig etcdschema.Migration
	testwait.Poll(t, time.Minute, "the migration in error", func() (bool, string) {
		mig = r.migration(id)
		return mig.Status == etcdschema.MigrationError, mig.Status
	})
	if r.mapped(mig.UUID) {
		t.Error("migration mapping left after the move's error")
	}
	if len(mig.Attempts) != 2 || mig.Attempts[0].Reason == "" || mig.Attempts[1].Reason == "" {
		t.Errorf("attempts %+v, want both failed hosts with reasons", mig.Attempts)
	}
	srv := r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != "compute-1" || srv["flavor"].(map[string]any)["original_name"] != "m1.tiny" ||
		srv["OS-EXT-STS:task_state"] != nil {
		t.Errorf("after a failed resize: %v on %s, task %v", srv["flavor"], hostOf(srv), srv["OS-EXT-STS:task_state"])
	}
	r.checkUsages("failed resize left the source as it was", hosts, map[string]usage{"compute-1": flavorUsage(tiny)},
		map[string]map[string]usage{id: {"compute-1": flavorUsage(tiny)}, mig.UUID: nil})
}

// TestResizeToSameHost: with allow_resize_to_same_host a resize on a
// one-host cloud lands on its own host, where the old flavor (held by the
// migration) and the new one (by the instance) both count until the
// confirm frees the old.
func TestResizeToSameHost(t *testing.T) {
	r := newMoveRigWith(t, 1, nil, func(c *configs.Config) { c.API.AllowResizeToSameHost = true })
	hosts := []string{"compute-1"}
	id := r.boot("mover", "m1.tiny", "compute-1")
	r.action(id, map[string]any{"resize": map[string]any{"flavorRef": "2"}}, http.StatusAccepted)
	srv := r.waitStatus(id, "VERIFY_RESIZE")
	if hostOf(srv) != "compute-1" {
		t.Fatalf("resized onto %s", hostOf(srv))
	}
	mig := r.migration(id)
	both := usage{int64(tiny.VCPUs + small.VCPUs), int64(tiny.RAMMB + small.RAMMB), int64(tiny.DiskGB + small.DiskGB)}
	r.checkUsages("both flavors on the one host", hosts, map[string]usage{"compute-1": both},
		map[string]map[string]usage{id: {"compute-1": flavorUsage(small)}, mig.UUID: {"compute-1": flavorUsage(tiny)}})
	r.action(id, map[string]any{"confirmResize": nil}, http.StatusNoContent)
	r.waitStatus(id, "ACTIVE")
	r.checkUsages("confirmed on the same host", hosts, map[string]usage{"compute-1": flavorUsage(small)},
		map[string]map[string]usage{id: {"compute-1": flavorUsage(small)}, mig.UUID: nil})

	// Without it, a one-host cloud has nowhere to resize to: the move
	// ends in error and the server stays as it was (Nova's NoValidHost).
	r.action(id, map[string]any{"migrate": nil}, http.StatusAccepted)
	var m etcdschema.Migration
	testwait.Poll(t, 30*time.Second, "the migration in error", func() (bool, string) {
		m = r.migration(id)
		return m.UUID != mig.UUID && m.Status == etcdschema.MigrationError, m.Status
	})
	srv = r.waitStatus(id, "ACTIVE")
	if srv["OS-EXT-STS:task_state"] != nil || hostOf(srv) != "compute-1" {
		t.Errorf("after a migration with nowhere to go: task %v on %s", srv["OS-EXT-STS:task_state"], hostOf(srv))
	}
	r.checkUsages("the failed migration changed nothing", hosts, map[string]usage{"compute-1": flavorUsage(small)},
		map[string]map[string]usage{id: {"compute-1": flavorUsage(small)}, m.UUID: nil})
}
