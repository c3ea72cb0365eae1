package agent

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// TestShelveSteps works each shelve step on h1 with the fake driver
// (failing where the case says) from an instance record, a claim and a
// cast as the API, the superconductor or the leader write them, and
// checks the instance, the claim, the host's instance info, the retry
// and the offload due date the step leaves.
func TestShelveSteps(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		fake    FakeConfig
		inst    etcdschema.Instance // UUID, Cell, Name filled in
		step    string
		claimed bool // h1 holds a claim for it before the step
		info    bool // h1 reports it before the step
		// after the step
		status, task, host   string
		wantClaim, wantInfo  bool
		wantRetry, wantFault bool
		wantDue              bool
	}{
		{desc: "shelve and offload at once", inst: etcdschema.Instance{Status: etcdschema.StatusActive, Host: "h1",
			TaskState: etcdschema.TaskShelving, Shelve: &etcdschema.ShelveState{OffloadNow: true}},
			step: etcdschema.StepShelve, claimed: true, info: true,
			status: etcdschema.StatusShelvedOffloaded},
		{desc: "shelve, offload later", inst: etcdschema.Instance{Status: etcdschema.StatusActive, Host: "h1",
			TaskState: etcdschema.TaskShelving, Shelve: &etcdschema.ShelveState{OffloadAfter: time.Hour}},
			step: etcdschema.StepShelve, claimed: true, info: true,
			status: etcdschema.StatusShelved, host: "h1", wantClaim: true, wantInfo: true, wantDue: true},
		{desc: "shelve, never offload", inst: etcdschema.Instance{Status: etcdschema.StatusActive, Host: "h1",
			TaskState: etcdschema.TaskShelving, Shelve: &etcdschema.ShelveState{}},
			step: etcdschema.StepShelve, claimed: true, info: true,
			status: etcdschema.StatusShelved, host: "h1", wantClaim: true, wantInfo: true},
		{desc: "offload", inst: etcdschema.Instance{Status: etcdschema.StatusShelved, Host: "h1",
			TaskState: etcdschema.TaskShelvingOffloading, Shelve: &etcdschema.ShelveState{}},
			step: etcdschema.StepShelveOffload, claimed: true, info: true,
			status: etcdschema.StatusShelvedOffloaded},
		{desc: "stale offload of an ACTIVE server", inst: etcdschema.Instance{Status: etcdschema.StatusActive, Host: "h1"},
			step: etcdschema.StepShelveOffload, claimed: true, info: true,
			status: etcdschema.StatusActive, host: "h1", wantClaim: true, wantInfo: true},
		{desc: "start a SHELVED server", inst: etcdschema.Instance{Status: etcdschema.StatusShelved, Host: "h1",
			TaskState: etcdschema.TaskUnshelving, Shelve: &etcdschema.ShelveState{}},
			step: etcdschema.StepUnshelveStart, claimed: true,
			status: etcdschema.StatusActive, host: "h1", wantClaim: true, wantInfo: true},
		{desc: "start fails: stays SHELVED with its claim", fake: FakeConfig{Fail: true},
			inst: etcdschema.Instance{Status: etcdschema.StatusShelved, Host: "h1", TaskState: etcdschema.TaskUnshelving},
			step: etcdschema.StepUnshelveStart, claimed: true,
			status: etcdschema.StatusShelved, host: "h1", wantClaim: true, wantFault: true},
		{desc: "spawn an offloaded server", inst: etcdschema.Instance{Status: etcdschema.StatusShelvedOffloaded, Host: "h1",
			TaskState: etcdschema.TaskUnshelving, Shelve: &etcdschema.ShelveState{}},
			step: etcdschema.StepUnshelveSpawn, claimed: true,
			status: etcdschema.StatusActive, host: "h1", wantClaim: true, wantInfo: true},
		{desc: "spawn fails, reschedulable: a retry", fake: FakeConfig{Fail: true, FailReschedulable: true},
			inst: etcdschema.Instance{Status: etcdschema.StatusShelvedOffloaded, Host: "h1", TaskState: etcdschema.TaskUnshelving,
				Shelve: &etcdschema.ShelveState{}},
			step: etcdschema.StepUnshelveSpawn, claimed: true,
			status: etcdschema.StatusShelvedOffloaded, task: etcdschema.TaskUnshelving, wantRetry: true},
		{desc: "spawn fails for good: offloaded with the fault", fake: FakeConfig{Fail: true},
			inst: etcdschema.Instance{Status: etcdschema.StatusShelvedOffloaded, Host: "h1", TaskState: etcdschema.TaskUnshelving,
				Shelve: &etcdschema.ShelveState{}},
			step: etcdschema.StepUnshelveSpawn, claimed: true,
			status: etcdschema.StatusShelvedOffloaded, wantFault: true},
		{desc: "stale spawn: the server names another host", inst: etcdschema.Instance{Status: etcdschema.StatusShelvedOffloaded,
			Host: "h2", TaskState: etcdschema.TaskUnshelving},
			step:   etcdschema.StepUnshelveSpawn,
			status: etcdschema.StatusShelvedOffloaded, task: etcdschema.TaskUnshelving, host: "h2"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cli, keys, p, a := startAgent(t, tc.fake)
			ctx := context.Background()
			const id = "i-shelve"
			in := tc.inst
			in.UUID, in.Cell, in.Name, in.Flavor = id, "cell1", "x", etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1}
			if tc.claimed {
				err := p.PutAllocations(ctx, id, placement.AllocationWrite{ProjectID: "p", UserID: "u",
					Allocations: map[string]placement.ProviderAllocation{a.ProviderUUID(): {Resources: map[string]int64{"VCPU": 1}}}})
				if err != nil {
					t.Fatal(err)
				}
			}
			ops := []clientv3.Op{clientv3.OpPut(keys.CellInstance("cell1", id), etcdschema.MustEncode(&in)),
				clientv3.OpPut(keys.Build("h1", id), etcdschema.MustEncode(records.ShelveCast(&in, tc.step, "req-1", time.Now())))}
			if tc.info {
				ops = append(ops, clientv3.OpPut(keys.HostInstance("h1", id), etcdschema.MustEncode(&etcdschema.InstanceInfo{UUID: id, Host: "h1"})))
			}
			if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				t.Fatal(err)
			}
			testwait.Until(t, "the cast worked", func() bool {
				resp, _ := cli.Get(ctx, keys.Build("h1", id), clientv3.WithCountOnly())
				return resp.Count == 0
			})
			got := instance(t, cli, keys, id)
			if got.Status != tc.status || got.TaskState != tc.task || got.Host != tc.host {
				t.Errorf("instance %s/%s on %q, want %s/%s on %q", got.Status, got.TaskState, got.Host, tc.status, tc.task, tc.host)
			}
			if (got.Fault != nil) != tc.wantFault {
				t.Errorf("fault %+v, want one: %v", got.Fault, tc.wantFault)
			}
			_, err := p.GetAllocations(ctx, id)
			if claim := err == nil; claim != tc.wantClaim {
				t.Errorf("claim held %v, want %v (%v)", claim, tc.wantClaim, err)
			}
			for what, c := range map[string]struct {
				key  string
				want bool
			}{
				"host instance info": {keys.HostInstance("h1", id), tc.wantInfo},
				"retry":              {keys.Retry("cell1", id), tc.wantRetry},
				"offload due date":   {keys.ShelvedOffload(id), tc.wantDue},
			} {
				resp, err := cli.Get(ctx, c.key, clientv3.WithCountOnly())
				if err != nil {
					t.Fatal(err)
				}
				if (resp.Count == 1) != c.want {
					t.Errorf("%s present %v, want %v", what, resp.Count == 1, c.want)
				}
			}
		})
	}
}
