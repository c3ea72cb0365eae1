package quotas

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// TestDeltasAllowed is _check_quota_for_upsize's check and words
// (check_deltas reports the user's count; the limits of the quota that
// was exceeded).
func TestDeltasAllowed(t *testing.T) {
	lim := func(cores, ram int64) Limits { return Limits{Instances: 10, Cores: cores, RAM: ram} }
	for _, c := range []struct {
		desc         string
		lim, userLim Limits
		used         Usage
		req          MoveRequest
		msg          string
	}{
		{desc: "fits", lim: lim(5, 4096), userLim: lim(5, 4096), used: Usage{Cores: 3, User: &Usage{Cores: 3}},
			req: MoveRequest{Cores: 2, RAMMB: 512}},
		{desc: "cores over", lim: lim(5, 4096), userLim: lim(5, 4096), used: Usage{Cores: 4, RAM: 1024, User: &Usage{Cores: 4, RAM: 1024}},
			req: MoveRequest{Cores: 2, RAMMB: 512}, msg: "Quota exceeded for cores: Requested 2, but already used 4 of 5 cores"},
		{desc: "cores and ram over", lim: lim(5, 1024), userLim: lim(5, 1024), used: Usage{Cores: 4, RAM: 1024, User: &Usage{Cores: 4, RAM: 1024}},
			req: MoveRequest{Cores: 2, RAMMB: 512}, msg: "Quota exceeded for cores, ram: Requested 2, 512, but already used 4, 1024 of 5, 1024 cores, ram"},
		{desc: "only a positive delta is checked", lim: lim(5, 1024), userLim: lim(5, 1024), used: Usage{Cores: 4, RAM: 1024, User: &Usage{Cores: 4, RAM: 1024}},
			req: MoveRequest{Cores: 1}},
		{desc: "the project's limit in the user's usage", lim: lim(5, -1), userLim: lim(5, -1), used: Usage{Cores: 5, User: &Usage{Cores: 1}},
			req: MoveRequest{Cores: 1}, msg: "Quota exceeded for cores: Requested 1, but already used 1 of 5 cores"},
		{desc: "the user's own limit", lim: lim(20, -1), userLim: lim(2, -1), used: Usage{Cores: 5, User: &Usage{Cores: 2}},
			req: MoveRequest{Cores: 1}, msg: "Quota exceeded for cores: Requested 1, but already used 2 of 2 cores"},
	} {
		t.Run(c.desc, func(t *testing.T) {
			err := deltasAllowed(c.lim, c.userLim, c.used, c.req)
			var over *OverQuotaError
			switch {
			case c.msg != "" && (!errors.As(err, &over) || over.Message != c.msg):
				t.Errorf("got %v, want %q", err, c.msg)
			case c.msg == "" && err != nil:
				t.Errorf("got %v, want none", err)
			}
		})
	}
}

// TestCountMoves: a server with a move in flight counts both its
// consumers (source under the migration, destination under the
// instance), and before the destination is claimed at least its old and
// new flavors, at every step of the hand-over.
func TestCountMoves(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/q")
	ctx := context.Background()
	put := func(key string, v etcdschema.Versioned) {
		t.Helper()
		if _, err := cli.Put(ctx, key, etcdschema.MustEncode(v)); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(consumer string, vcpu, mem int64) {
		put(keys.Consumer(consumer), &etcdschema.Consumer{UUID: consumer, ProjectID: "p", Allocations: map[string]etcdschema.ConsumerAllocation{
			"rp": {Resources: map[string]int64{"VCPU": vcpu, "MEMORY_MB": mem}}}})
	}
	small := etcdschema.Flavor{ID: "1", VCPUs: 1, RAMMB: 512}
	big := etcdschema.Flavor{ID: "2", VCPUs: 4, RAMMB: 2048}
	put(keys.InstanceMapping("s"), &etcdschema.InstanceMapping{InstanceUUID: "s", Cell: "c1", ProjectID: "p"})
	put(keys.CellInstance("c1", "s"), &etcdschema.Instance{UUID: "s", Cell: "c1", Flavor: small, ProjectID: "p", UserID: "u",
		Status: etcdschema.StatusActive, TaskState: etcdschema.TaskResizePrep, MigrationUUID: "m"})
	mig := &etcdschema.Migration{UUID: "m", InstanceUUID: "s", Cell: "c1", OldFlavor: small, NewFlavor: big,
		Status: etcdschema.MigrationPreMigrating}
	put(keys.Migration("c1", "m"), mig)
	s := New(cli, keys, nil, nil)
	both := Usage{Instances: 1, Cores: 5, RAM: 2560}
	for _, step := range []struct {
		desc string
		do   func()
		want Usage
	}{
		{"accepted: the source under the instance", func() { claim("s", 1, 512) }, both},
		{"the source handed to the migration", func() {
			claim("m", 1, 512)
			if _, err := cli.Delete(ctx, keys.Consumer("s")); err != nil {
				t.Fatal(err)
			}
		}, both},
		{"the destination claimed", func() { claim("s", 4, 2048) }, both},
		{"handed off to the destination", func() {
			mig.Status = etcdschema.MigrationMigrating
			put(keys.Migration("c1", "m"), mig)
		}, both},
		{"confirmed: the source freed", func() {
			if _, err := cli.Delete(ctx, keys.Consumer("m")); err != nil {
				t.Fatal(err)
			}
			mig.Status = etcdschema.MigrationConfirmed
			put(keys.Migration("c1", "m"), mig)
		}, Usage{Instances: 1, Cores: 4, RAM: 2048}},
	} {
		step.do()
		got, _, err := s.CountUser(ctx, "p", "u", "")
		if err != nil {
			t.Fatal(err)
		}
		want := step.want
		mine := want
		want.User = &mine
		if got.User == nil || *got.User != mine {
			t.Errorf("%s: the user's usage %+v, want %+v", step.desc, got.User, mine)
		}
		got.User = nil
		want.User = nil
		if got != want {
			t.Errorf("%s: usage %+v, want %+v", step.desc, got, want)
		}
	}
}

// TestResizeGuardFencesCreates: a resize and a create checked against
// the same count cannot both commit.
func TestResizeGuardFencesCreates(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/q")
	ctx := context.Background()
	s := New(cli, keys, Limits{Instances: -1, Cores: 2, RAM: -1}, nil)
	put := func(key string, v etcdschema.Versioned) clientv3.Op {
		return clientv3.OpPut(key, etcdschema.MustEncode(v))
	}
	if _, err := cli.Txn(ctx).Then(
		put(keys.InstanceMapping("s"), &etcdschema.InstanceMapping{InstanceUUID: "s", ProjectID: "p"}),
		put(keys.BuildRequest("s"), &etcdschema.BuildRequest{InstanceUUID: "s", ProjectID: "p", UserID: "u",
			Flavor: etcdschema.Flavor{VCPUs: 1}})).Commit(); err != nil {
		t.Fatal(err)
	}
	rg, err := s.ReserveMove(ctx, MoveRequest{Project: "p", User: "u", Cores: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, cg, err := s.ReserveServers(ctx, ServerRequest{Project: "p", User: "u", Min: 1, Max: 1, VCPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := cli.Txn(ctx).If(cg.Cmps...).Then(cg.Ops...).Commit(); err != nil || !resp.Succeeded {
		t.Fatalf("the create's guard: %v %v", resp, err)
	}
	if resp, err := cli.Txn(ctx).If(rg.Cmps...).Then(rg.Ops...).Commit(); err != nil || resp.Succeeded {
		t.Fatalf("the resize committed against a count the create changed: %v", err)
	}
}

// TestUpsizeCountsOnlyUnderALimit: an upsize whose grown resources no
// limit caps (the project's or the user's) is not counted — its guard
// only moves the fence, with nothing to compare — while a cap on either
// makes it count and compare as before.
func TestUpsizeCountsOnlyUnderALimit(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/q")
	ctx := context.Background()
	for _, c := range []struct {
		desc     string
		defaults Limits
		users    map[string]map[string]int64
		req      MoveRequest
		counted  bool
	}{
		{desc: "unlimited", defaults: Limits{Instances: 10, Cores: -1, RAM: -1},
			req: MoveRequest{Project: "p", User: "u", Cores: 2, RAMMB: 512}},
		{desc: "only ram grows, cores capped", defaults: Limits{Instances: 10, Cores: 20, RAM: -1},
			req: MoveRequest{Project: "p", User: "u", RAMMB: 512}},
		{desc: "cores grow and are capped", defaults: Limits{Instances: 10, Cores: 20, RAM: -1},
			req: MoveRequest{Project: "p", User: "u", Cores: 1}, counted: true},
		{desc: "the user's own cap", defaults: Limits{Instances: 10, Cores: -1, RAM: -1},
			users: map[string]map[string]int64{"u": {Cores: 4}},
			req:   MoveRequest{Project: "p", User: "u", Cores: 1}, counted: true},
	} {
		t.Run(c.desc, func(t *testing.T) {
			if _, err := cli.Put(ctx, keys.QuotaSet("p"), string(etcdschema.MustEncode(&etcdschema.QuotaSet{Users: c.users}))); err != nil {
				t.Fatal(err)
			}
			s := New(cli, keys, c.defaults, nil)
			g, err := s.ReserveMove(ctx, c.req)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Ops) != 1 {
				t.Errorf("guard ops %d, want the fence's put", len(g.Ops))
			}
			if counted := len(g.Cmps) > 0; counted != c.counted {
				t.Errorf("counted (compares the fence) = %v, want %v", counted, c.counted)
			}
		})
	}
}
