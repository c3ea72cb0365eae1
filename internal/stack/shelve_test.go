package stack

import (
	"encoding/json"
	"fmt"
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

// novaAs calls the Nova API with token at microversion mv and decodes
// the JSON answer (nil when the body is empty).
func (r *moveRig) novaAs(token, mv, method, path string, body any) (int, map[string]any) {
	r.t.Helper()
	code, b := r.novaText(token, mv, method, path, body)
	var out map[string]any
	if len(b) > 0 {
		if err := json.Unmarshal([]byte(b), &out); err != nil {
			r.t.Fatalf("%s %s: %d %s", method, path, code, b)
		}
	}
	return code, out
}

// faultMessage is the message of a Nova error body.
func faultMessage(out map[string]any) string {
	for _, v := range out {
		if m, ok := v.(map[string]any); ok {
			if s, ok := m["message"].(string); ok {
				return s
			}
		}
	}
	return ""
}

// hostInfo says whether host's agent reports instance id (the
// schedulers' view, seed isolate-scheduler-db).
func (r *moveRig) hostInfo(host, id string) bool {
	r.t.Helper()
	resp, err := r.s.cli.Get(r.ctx, r.s.keys.HostInstance(host, id), clientv3.WithCountOnly())
	if err != nil {
		r.t.Fatal(err)
	}
	return resp.Count == 1
}

// instance reads id's record in cell1.
func (r *moveRig) instance(id string) etcdschema.Instance {
	r.t.Helper()
	key := r.s.keys.CellInstance("cell1", id)
	resp, err := r.s.cli.Get(r.ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		r.t.Fatalf("read %s: %v", key, err)
	}
	var in etcdschema.Instance
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &in); err != nil {
		r.t.Fatal(err)
	}
	return in
}

// disableHost disables host's compute service (2.53 os-services).
func (r *moveRig) disableHost(host string) {
	r.t.Helper()
	code, out := r.novaAs("admin:admin", "2.53", "GET", "/os-services?host="+host, nil)
	svcs, _ := out["services"].([]any)
	if code != http.StatusOK || len(svcs) != 1 {
		r.t.Fatalf("services of %s: %d %v", host, code, out)
	}
	id := svcs[0].(map[string]any)["id"].(string)
	if code, out := r.novaAs("admin:admin", "2.53", "PUT", "/os-services/"+id, map[string]any{"status": "disabled"}); code != http.StatusOK {
		r.t.Fatalf("disable %s: %d %v", host, code, out)
	}
}

// actionsOf is the server's instance actions, newest first, each as
// "action:event/result,..." of its events (show at 2.84 as admin).
func (r *moveRig) actionsOf(id string) []string {
	r.t.Helper()
	code, out := r.novaAs("admin:admin", "2.84", "GET", "/servers/"+id+"/os-instance-actions", nil)
	if code != http.StatusOK {
		r.t.Fatalf("actions of %s: %d %v", id, code, out)
	}
	var got []string
	for _, a := range out["instanceActions"].([]any) {
		act := a.(map[string]any)
		_, show := r.novaAs("admin:admin", "2.84", "GET", "/servers/"+id+"/os-instance-actions/"+act["request_id"].(string), nil)
		var evs []string
		for _, e := range show["instanceAction"].(map[string]any)["events"].([]any) {
			ev := e.(map[string]any)
			evs = append(evs, fmt.Sprintf("%v/%v", ev["event"], ev["result"]))
		}
		got = append(got, act["action"].(string)+":"+strings.Join(evs, ","))
	}
	return got
}

// TestShelveOffloadAndUnshelve: with shelved_offload_time 0 (Nova's
// default) a shelve ends SHELVED_OFFLOADED with no host, the instance's
// allocation freed and the host's instance info removed; the unshelve
// schedules it again and it is ACTIVE on a host holding exactly its
// flavor; the actions show each step; a second shelve and a delete of
// the offloaded server leave nothing behind.
func TestShelveOffloadAndUnshelve(t *testing.T) {
	r := newMoveRig(t, 2, nil)
	hosts := []string{"compute-1", "compute-2"}
	id := r.boot("shelver", "m1.tiny", "compute-1")
	r.action(id, map[string]any{"shelve": nil}, http.StatusAccepted)
	srv := r.waitStatus(id, "SHELVED_OFFLOADED")
	if srv["OS-EXT-SRV-ATTR:host"] != nil || srv["OS-EXT-SRV-ATTR:hypervisor_hostname"] != nil ||
		srv["OS-EXT-STS:vm_state"] != "shelved_offloaded" || srv["OS-EXT-STS:task_state"] != nil ||
		srv["OS-EXT-STS:power_state"] != float64(4) {
		t.Errorf("offloaded server shows host %v node %v vm_state %v task %v power %v", srv["OS-EXT-SRV-ATTR:host"],
			srv["OS-EXT-SRV-ATTR:hypervisor_hostname"], srv["OS-EXT-STS:vm_state"], srv["OS-EXT-STS:task_state"],
			srv["OS-EXT-STS:power_state"])
	}
	r.checkUsages("offloaded: nothing held", hosts, map[string]usage{}, map[string]map[string]usage{id: nil})
	if r.hostInfo("compute-1", id) {
		t.Error("the host still reports the offloaded instance")
	}
	if got := r.actionsOf(id); len(got) != 2 || got[0] != "shelve:compute_shelve_instance/Success" {
		t.Errorf("actions after shelve %q, want shelve then create", got)
	}

	r.action(id, map[string]any{"unshelve": nil}, http.StatusAccepted)
	srv = r.waitStatus(id, "ACTIVE")
	h := hostOf(srv)
	r.checkUsages("unshelved: its flavor on its new host", hosts, map[string]usage{h: flavorUsage(tiny)},
		map[string]map[string]usage{id: {h: flavorUsage(tiny)}})
	if !r.hostInfo(h, id) {
		t.Errorf("%s does not report the unshelved instance", h)
	}
	got := r.actionsOf(id)
	want := "unshelve:compute_unshelve_instance/Success,schedule_instances/Success"
	if len(got) != 3 || got[0] != want {
		t.Errorf("actions after unshelve %q, want %q first", got, want)
	}

	// Offloaded again, then deleted without any agent.
	r.action(id, map[string]any{"shelve": nil}, http.StatusAccepted)
	r.waitStatus(id, "SHELVED_OFFLOADED")
	if code, out := r.nova("DELETE", "/servers/"+id, nil); code != http.StatusNoContent {
		t.Fatalf("delete offloaded: %d %v", code, out)
	}
	testwait.Poll(t, 30*time.Second, "the offloaded server gone", func() (bool, string) {
		code, _ := r.nova("GET", "/servers/"+id, nil)
		return code == http.StatusNotFound, fmt.Sprint(code)
	})
	r.checkUsages("deleted: nothing held", hosts, map[string]usage{}, map[string]map[string]usage{id: nil})
}

// TestShelveKeepsHostUntilOffloadDue: with shelved_offload_time 1 a
// shelved server keeps its host and allocation (SHELVED) until the
// leader's duty finds it due and casts its offload; an unshelve of a
// SHELVED server starts it again on its own host, its allocation never
// moved; a delete of a SHELVED server frees it.
func TestShelveKeepsHostUntilOffloadDue(t *testing.T) {
	r := newMoveRigWith(t, 2, nil, func(c *configs.Config) {
		c.API.ShelvedOffloadTime = 1
		c.Scheduler.LeaderInterval = 200 * time.Millisecond
	})
	hosts := []string{"compute-1", "compute-2"}
	id := r.boot("keeper", "m1.tiny", "compute-1")
	r.action(id, map[string]any{"shelve": nil}, http.StatusAccepted)
	// SHELVED first: its host, allocation and instance info are kept.
	var srv map[string]any
	testwait.Poll(t, time.Minute, "SHELVED or already offloaded", func() (bool, string) {
		srv = r.server(id)
		return srv["status"] == "SHELVED" || srv["status"] == "SHELVED_OFFLOADED", fmt.Sprint(srv["status"])
	})
	if srv["status"] == "SHELVED" && hostOf(srv) != "compute-1" {
		t.Errorf("SHELVED server on %v, want compute-1", srv["OS-EXT-SRV-ATTR:host"])
	}
	r.waitStatus(id, "SHELVED_OFFLOADED")
	r.checkUsages("offloaded by the leader", hosts, map[string]usage{}, map[string]map[string]usage{id: nil})
	if got := r.actionsOf(id); len(got) != 3 || got[0] != "shelveOffload:compute_shelve_offload_instance/Success" {
		t.Errorf("actions %q, want the periodic shelveOffload first", got)
	}
}

// TestUnshelveShelvedOnItsHost: with shelved_offload_time -1 the server
// stays SHELVED; unshelve starts it on its own host (allocation kept
// throughout); shelveOffload is the admin's; a SHELVED server deletes.
func TestUnshelveShelvedOnItsHost(t *testing.T) {
	r := newMoveRigWith(t, 2, nil, func(c *configs.Config) { c.API.ShelvedOffloadTime = -1 })
	hosts := []string{"compute-1", "compute-2"}
	id := r.boot("stayer", "m1.tiny", "compute-1")
	held := map[string]usage{"compute-1": flavorUsage(tiny)}
	r.action(id, map[string]any{"shelve": nil}, http.StatusAccepted)
	srv := r.waitStatus(id, "SHELVED")
	if hostOf(srv) != "compute-1" || srv["OS-EXT-STS:vm_state"] != "shelved" {
		t.Errorf("SHELVED on %v vm_state %v", srv["OS-EXT-SRV-ATTR:host"], srv["OS-EXT-STS:vm_state"])
	}
	r.checkUsages("SHELVED keeps its allocation", hosts, held, map[string]map[string]usage{id: held})
	r.action(id, map[string]any{"unshelve": nil}, http.StatusAccepted)
	srv = r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != "compute-1" {
		t.Errorf("unshelved onto %s, want its own compute-1", hostOf(srv))
	}
	r.checkUsages("unshelved in place", hosts, held, map[string]map[string]usage{id: held})
	if got := r.actionsOf(id); len(got) != 3 || got[0] != "unshelve:compute_start_instance/Success" {
		t.Errorf("actions %q, want unshelve with compute_start_instance first", got)
	}

	r.action(id, map[string]any{"shelve": nil}, http.StatusAccepted)
	r.waitStatus(id, "SHELVED")
	if code, out := r.nova("DELETE", "/servers/"+id, nil); code != http.StatusNoContent {
		t.Fatalf("delete shelved: %d %v", code, out)
	}
	testwait.Poll(t, 30*time.Second, "the shelved server gone", func() (bool, string) {
		code, _ := r.nova("GET", "/servers/"+id, nil)
		return code == http.StatusNotFound, fmt.Sprint(code)
	})
	r.checkUsages("deleted: nothing held", hosts, map[string]usage{}, map[string]map[string]usage{id: nil})
}

// TestUnshelveRetriedOnAlternate: the host the scheduler prefers for the
// unshelve (compute-2: most room, its fake driver failing) fails the
// spawn; the cell conductor claims a stored alternate and the server is
// ACTIVE there, holding exactly its flavor.
func TestUnshelveRetriedOnAlternate(t *testing.T) {
	r := newMoveRig(t, 3, map[string]bool{"compute-2": true})
	hosts := []string{"compute-1", "compute-2", "compute-3"}
	id := r.boot("mover", "m1.tiny", "compute-1")
	r.action(id, map[string]any{"shelve": nil}, http.StatusAccepted)
	r.waitStatus(id, "SHELVED_OFFLOADED")
	large := api.DefaultFlavors()[3]
	f1 := r.boot("filler1", "m1.large", "compute-1")
	f3 := r.boot("filler3", "m1.large", "compute-3") // compute-2 has the most room
	r.action(id, map[string]any{"unshelve": nil}, http.StatusAccepted)
	srv := r.waitStatus(id, "ACTIVE")
	h := hostOf(srv)
	if h == "compute-2" {
		t.Fatalf("unshelved onto the failing compute-2")
	}
	sum := usage{int64(large.VCPUs + tiny.VCPUs), int64(large.RAMMB + tiny.RAMMB), int64(large.DiskGB + tiny.DiskGB)}
	want := map[string]usage{"compute-1": flavorUsage(large), "compute-3": flavorUsage(large)}
	want[h] = sum
	r.checkUsages("unshelved on the alternate", hosts, want,
		map[string]map[string]usage{id: {h: flavorUsage(tiny)}, f1: {"compute-1": flavorUsage(large)},
			f3: {"compute-3": flavorUsage(large)}})
	got := r.actionsOf(id)
	if len(got) < 1 || !strings.HasPrefix(got[0], "unshelve:compute_unshelve_instance/Success,compute_unshelve_instance/Error,schedule_instances/Success") {
		t.Errorf("actions %q, want the unshelve's failed and retried spawns", got)
	}
}

// TestUnshelveExhaustedStaysOffloaded: every host the unshelve may use
// fails the spawn; the server is SHELVED_OFFLOADED again with no task,
// no host, no allocation, and a fault naming each attempt's host.
func TestUnshelveExhaustedStaysOffloaded(t *testing.T) {
	r := newMoveRig(t, 3, map[string]bool{"compute-2": true, "compute-3": true})
	hosts := []string{"compute-1", "compute-2", "compute-3"}
	id := r.boot("mover", "m1.tiny", "compute-1")
	r.action(id, map[string]any{"shelve": nil}, http.StatusAccepted)
	r.waitStatus(id, "SHELVED_OFFLOADED")
	r.disableHost("compute-1")
	r.action(id, map[string]any{"unshelve": nil}, http.StatusAccepted)
	// Nova records the fault (instance_faults) but shows a server's
	// fault only when it is ERROR or DELETED: the record holds it, the
	// unshelve action's events show each failure.
	var srv map[string]any
	testwait.Poll(t, time.Minute, "offloaded again with no task", func() (bool, string) {
		srv = r.server(id)
		return srv["status"] == "SHELVED_OFFLOADED" && srv["OS-EXT-STS:task_state"] == nil,
			fmt.Sprintf("%v/%v", srv["status"], srv["OS-EXT-STS:task_state"])
	})
	if srv["fault"] != nil {
		t.Errorf("fault shown for a SHELVED_OFFLOADED server: %v", srv["fault"])
	}
	in := r.instance(id)
	if in.Fault == nil || !strings.Contains(in.Fault.Message, "compute-2: fake driver") ||
		!strings.Contains(in.Fault.Message, "compute-3: fake driver") {
		t.Errorf("recorded fault %+v does not name both failed hosts", in.Fault)
	}
	if got := r.actionsOf(id); len(got) != 3 ||
		got[0] != "unshelve:compute_unshelve_instance/Error,compute_unshelve_instance/Error,schedule_instances/Success" {
		t.Errorf("actions %q, want the unshelve's two failed spawns", got)
	}
	if srv["OS-EXT-SRV-ATTR:host"] != nil {
		t.Errorf("exhausted unshelve left host %v", srv["OS-EXT-SRV-ATTR:host"])
	}
	r.checkUsages("exhausted: nothing held", hosts, map[string]usage{}, map[string]map[string]usage{id: nil})
}

// TestShelveRefusals: Nova 26's answers to shelve actions in the wrong
// state, by the wrong caller, or with a bad zone or host (the words of
// shelve.py, common.raise_http_conflict_for_instance_invalid_state and
// nova/exception.py), then a 2.91 unshelve to a named host and zone.
func TestShelveRefusals(t *testing.T) {
	r := newMoveRigWith(t, 2, nil, func(c *configs.Config) { c.API.ShelvedOffloadTime = -1 })
	id := r.boot("refused", "m1.tiny", "compute-1")
	act := func(token, mv string, body any, wantCode int, wantMsg string) {
		t.Helper()
		code, out := r.novaAs(token, mv, "POST", "/servers/"+id+"/action", body)
		if code != wantCode || (wantMsg != "" && faultMessage(out) != wantMsg) {
			t.Errorf("%s %v: %d %q, want %d %q", token, body, code, faultMessage(out), wantCode, wantMsg)
		}
	}
	const admin, member, other = "admin:admin", "alice:admin", "bob:other"
	act(admin, "2.1", map[string]any{"unshelve": nil}, 409, "Cannot 'unshelve' instance "+id+" while it is in vm_state active")
	act(admin, "2.1", map[string]any{"shelveOffload": nil}, 409, "Cannot 'shelveOffload' instance "+id+" while it is in vm_state active")
	act(other, "2.1", map[string]any{"shelve": nil}, 404, "Instance "+id+" could not be found.")
	act(member, "2.1", map[string]any{"shelveOffload": nil}, 403, "Policy doesn't allow os_compute_api:os-shelve:shelve_offload to be performed.")

	act(member, "2.1", map[string]any{"shelve": nil}, 202, "")
	r.waitStatus(id, "SHELVED")
	act(admin, "2.1", map[string]any{"shelve": nil}, 409, "Cannot 'shelve' instance "+id+" while it is in vm_state shelved")
	notOffloaded := "Specifying an availability zone or a host when unshelving server \"" + id +
		"\" with status \"shelved\" is not supported. The server status must be SHELVED_OFFLOADED."
	act(admin, "2.77", map[string]any{"unshelve": map[string]any{"availability_zone": "nova"}}, 409, notOffloaded)
	act(admin, "2.91", map[string]any{"unshelve": map[string]any{"host": "compute-2"}}, 409, notOffloaded)
	act(admin, "2.77", map[string]any{"unshelve": map[string]any{}}, 400,
		"Invalid input for field/attribute unshelve. Value: {}. 'availability_zone' is a required property")

	act(admin, "2.1", map[string]any{"shelveOffload": nil}, 202, "")
	r.waitStatus(id, "SHELVED_OFFLOADED")
	act(member, "2.91", map[string]any{"unshelve": map[string]any{"host": "compute-2"}}, 403,
		"Policy doesn't allow os_compute_api:os-shelve:unshelve_to_host to be performed.")
	act(admin, "2.91", map[string]any{"unshelve": map[string]any{"host": "nowhere"}}, 400, "Compute host nowhere could not be found.")
	act(admin, "2.77", map[string]any{"unshelve": map[string]any{"availability_zone": "nowhere"}}, 400,
		"The requested availability zone is not available")
	if code, out := r.novaAs(admin, "2.1", "POST", "/os-aggregates",
		map[string]any{"aggregate": map[string]any{"name": "a1", "availability_zone": "az1"}}); code != 200 {
		t.Fatalf("create aggregate: %d %v", code, out)
	} else {
		agg := out["aggregate"].(map[string]any)["id"]
		if code, out := r.novaAs(admin, "2.1", "POST", fmt.Sprintf("/os-aggregates/%v/action", agg),
			map[string]any{"add_host": map[string]any{"host": "compute-1"}}); code != 200 {
			t.Fatalf("add compute-1 to az1: %d %v", code, out)
		}
	}
	act(admin, "2.91", map[string]any{"unshelve": map[string]any{"availability_zone": "az1", "host": "compute-2"}}, 409,
		"Host \"compute-2\" is not in the availability zone \"az1\".")
	act(admin, "2.91", map[string]any{"unshelve": map[string]any{"availability_zone": "nova", "host": "compute-2"}}, 202, "")
	srv := r.waitStatus(id, "ACTIVE")
	if hostOf(srv) != "compute-2" || srv["OS-EXT-AZ:availability_zone"] != "nova" {
		t.Errorf("unshelved to %s in %v, want compute-2 in nova", hostOf(srv), srv["OS-EXT-AZ:availability_zone"])
	}
}

// TestUnshelveNoValidHostStaysOffloaded: with no host to take it the
// unshelve leaves the server SHELVED_OFFLOADED with no task and nothing
// claimed, its schedule_instances event in error (Nova's conductor logs
// NoValidHost and resets the task; no fault).
func TestUnshelveNoValidHostStaysOffloaded(t *testing.T) {
	r := newMoveRig(t, 2, nil)
	hosts := []string{"compute-1", "compute-2"}
	id := r.boot("homeless", "m1.tiny", "compute-1")
	r.action(id, map[string]any{"shelve": nil}, http.StatusAccepted)
	r.waitStatus(id, "SHELVED_OFFLOADED")
	r.disableHost("compute-1")
	r.disableHost("compute-2")
	r.action(id, map[string]any{"unshelve": nil}, http.StatusAccepted)
	testwait.Poll(t, time.Minute, "the unshelve given up", func() (bool, string) {
		got := r.actionsOf(id)
		return len(got) == 3 && got[0] == "unshelve:schedule_instances/Error", fmt.Sprint(got)
	})
	srv := r.server(id)
	if srv["status"] != "SHELVED_OFFLOADED" || srv["OS-EXT-STS:task_state"] != nil || srv["OS-EXT-SRV-ATTR:host"] != nil {
		t.Errorf("after no valid host: %v/%v on %v", srv["status"], srv["OS-EXT-STS:task_state"], srv["OS-EXT-SRV-ATTR:host"])
	}
	if in := r.instance(id); in.Fault != nil {
		t.Errorf("fault %+v recorded for a NoValidHost unshelve", in.Fault)
	}
	r.checkUsages("no valid host: nothing held", hosts, map[string]usage{}, map[string]map[string]usage{id: nil})
	// Its MoveRequest is gone: a new unshelve is accepted.
	r.action(id, map[string]any{"unshelve": nil}, http.StatusAccepted)
}
