package leader

import (
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/testwait"
)

// TestShelvedOffloadDuty: a due entry of a server still SHELVED with no
// task on its host gets the offload cast and the shelveOffload action,
// and the entry goes; an entry not due yet stays; an entry whose server
// was deleted, unshelved or moved on is dropped and the server left
// alone.
func TestShelvedOffloadDuty(t *testing.T) {
	c := newCloud(t)
	f, _ := c.lead()
	k := c.keys
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		desc       string
		inst       *etcdschema.Instance // nil: deleted
		due        time.Time
		wantCast   bool
		wantKept   bool // the entry stays
		wantStatus string
	}{
		{"due", &etcdschema.Instance{Status: etcdschema.StatusShelved, Host: "a"}, now.Add(-time.Second), true, false, etcdschema.StatusShelved},
		{"not due", &etcdschema.Instance{Status: etcdschema.StatusShelved, Host: "a"}, now.Add(time.Minute), false, true, etcdschema.StatusShelved},
		{"deleted", nil, now.Add(-time.Second), false, false, ""},
		{"unshelved meanwhile", &etcdschema.Instance{Status: etcdschema.StatusActive, Host: "a"}, now.Add(-time.Second), false, false, etcdschema.StatusActive},
		{"being unshelved", &etcdschema.Instance{Status: etcdschema.StatusShelved, Host: "a", TaskState: etcdschema.TaskUnshelving},
			now.Add(-time.Second), false, false, etcdschema.StatusShelved},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			id := "i-" + tc.desc
			if tc.inst != nil {
				in := *tc.inst
				in.UUID, in.Cell = id, "cell1"
				c.put(k.CellInstance("cell1", id), &in)
			}
			c.put(k.ShelvedOffload(id), &etcdschema.ShelvedOffload{InstanceUUID: id, Cell: "cell1", Host: "a", Due: tc.due})
			duty := ShelvedOffloadDuty(c.cli, k, time.Second, hclog.NewNullLogger(), func() time.Time { return now })
			if err := duty.Run(c.ctx, f); err != nil {
				t.Fatal(err)
			}
			if got := c.exists(k.ShelvedOffload(id)); got != tc.wantKept {
				t.Errorf("entry kept %v, want %v", got, tc.wantKept)
			}
			resp, err := c.cli.Get(c.ctx, k.Build("a", id))
			if err != nil {
				t.Fatal(err)
			}
			if (len(resp.Kvs) == 1) != tc.wantCast {
				t.Fatalf("offload cast %v, want %v", len(resp.Kvs) == 1, tc.wantCast)
			}
			if tc.wantCast {
				var b etcdschema.Build
				if err := etcdschema.Decode(k.Build("a", id), resp.Kvs[0].Value, &b); err != nil {
					t.Fatal(err)
				}
				if b.Op != etcdschema.OpMove || b.Move == nil || b.Move.Step != etcdschema.StepShelveOffload {
					t.Errorf("cast %+v, want the shelve_offload step", b)
				}
			}
			if tc.inst == nil {
				return
			}
			ir, err := c.cli.Get(c.ctx, k.CellInstance("cell1", id))
			if err != nil {
				t.Fatal(err)
			}
			var in etcdschema.Instance
			if err := etcdschema.Decode("instance", ir.Kvs[0].Value, &in); err != nil {
				t.Fatal(err)
			}
			wantTask := tc.inst.TaskState
			if tc.wantCast {
				wantTask = etcdschema.TaskShelvingOffloading
				if n := len(in.ShelveActions); n != 1 || in.ShelveActions[0].Action != etcdschema.ActionShelveOffload ||
					in.ShelveActions[0].RequestID == "" {
					t.Errorf("actions %+v, want one shelveOffload with a request id", in.ShelveActions)
				}
			}
			if in.Status != tc.wantStatus || in.TaskState != wantTask {
				t.Errorf("instance %s/%s, want %s/%s", in.Status, in.TaskState, tc.wantStatus, wantTask)
			}
		})
	}
}

// TestDutyDownHostRetriesAnUnshelveSpawn: the spawn of an unshelve cast
// to a host that went down is taken back like a move's prep (the server
// still waits for a host): a retry for the cell conductor, the server
// left as it was; a shelve step there waits for its host.
func TestDutyDownHostRetriesAnUnshelveSpawn(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192)
	f, _ := c.lead()
	k := c.keys
	for _, m := range []struct{ uuid, step, status string }{
		{"i-spawn", etcdschema.StepUnshelveSpawn, etcdschema.StatusShelvedOffloaded},
		{"i-stop", etcdschema.StepShelve, etcdschema.StatusActive},
	} {
		in := &etcdschema.Instance{UUID: m.uuid, Status: m.status, Host: "a", Cell: "cell1", TaskState: etcdschema.TaskSpawning}
		c.put(k.CellInstance("cell1", m.uuid), in)
		c.put(k.Build("a", m.uuid), records.ShelveCast(in, m.step, "req-1", time.Now()))
	}
	if _, err := c.cli.Delete(c.ctx, k.Alive("a")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "a seen down", func() bool { down, _ := c.hosts.DownHosts(); return slices.Contains(down, "a") })
	now := time.Now()
	for _, at := range []time.Time{now, now.Add(2 * time.Minute)} { // recorded down, then past the grace
		if err := c.duties(at, 1).downHosts(c.ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	if !c.exists(k.Retry("cell1", "i-spawn")) || c.exists(k.Build("a", "i-spawn")) {
		t.Error("the unshelve's spawn on the down host was not filed for retry")
	}
	if !c.exists(k.Build("a", "i-stop")) || c.exists(k.Retry("cell1", "i-stop")) {
		t.Error("a shelve step on the down host did not wait for it")
	}
}
