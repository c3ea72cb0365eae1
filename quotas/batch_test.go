package quotas

import (
	"context"
	"fmt"
	"slices"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
)

// PlanServers admits what fits the usage record, each create after the
// ones before it, and sends alone what needs a count: no record yet,
// past the record, a user's own limits, a group's member limit.
func TestPlanServersAdmits(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/plan")
	create := func(project, user string, n int) ServerRequest {
		return ServerRequest{Project: project, User: user, Min: n, Max: n, VCPUs: 1, RAMMB: 512}
	}
	inGroup := func(r ServerRequest) ServerRequest { r.Group = "g"; return r }
	for i, c := range []struct {
		desc     string
		limits   Limits // the defaults
		userSet  Limits // the user "own"'s limits, set by os-quota-sets (nil: none)
		recorded bool   // a counted create first leaves a record of 1
		reqs     []ServerRequest
		alone    []bool
		fence    bool // the plan compares the fence (a limit is checked)
	}{
		{desc: "nothing limited", limits: Limits{Instances: Unlimited, Cores: Unlimited, RAM: Unlimited},
			reqs: []ServerRequest{create("p", "u", 5), create("p", "u", 62)}, alone: []bool{false, false}},
		{desc: "no record yet", limits: Limits{Instances: 10},
			reqs: []ServerRequest{create("p", "u", 1)}, alone: []bool{true}},
		{desc: "each after the ones before it", limits: Limits{Instances: 10, Cores: Unlimited, RAM: Unlimited}, recorded: true,
			reqs:  []ServerRequest{create("p", "u", 4), create("p", "u", 6), create("p", "u", 4), create("p", "u", 5)},
			alone: []bool{false, true, false, true}, fence: true},
		{desc: "cores past the record", limits: Limits{Instances: 100, Cores: 3, RAM: Unlimited}, recorded: true,
			reqs: []ServerRequest{create("p", "u", 2), create("p", "u", 1)}, alone: []bool{false, true}, fence: true},
		{desc: "a user's own limits count", limits: Limits{Instances: Unlimited, Cores: Unlimited, RAM: Unlimited},
			userSet: Limits{Instances: 5}, reqs: []ServerRequest{create("p", "own", 1), create("p", "u", 1)},
			alone: []bool{true, false}},
		{desc: "a group's member limit counts", limits: Limits{Instances: Unlimited, Cores: Unlimited, RAM: Unlimited, ServerGroupMembers: 10},
			reqs: []ServerRequest{inGroup(create("p", "u", 1)), create("p", "u", 1)}, alone: []bool{true, false}},
		{desc: "an unlimited group", limits: Limits{Instances: Unlimited, Cores: Unlimited, RAM: Unlimited, ServerGroupMembers: Unlimited},
			reqs: []ServerRequest{inGroup(create("p", "u", 1))}, alone: []bool{false}},
	} {
		t.Run(c.desc, func(t *testing.T) {
			project := fmt.Sprintf("p-%d", i)
			for j := range c.reqs {
				c.reqs[j].Project = project
			}
			s := New(cli, keys, c.limits, nil)
			if c.userSet != nil {
				if _, err := s.Update(ctx, project, "own", c.userSet, nil); err != nil {
					t.Fatal(err)
				}
			}
			if c.recorded {
				_, g, err := s.ReserveServers(ctx, create(project, "u", 1))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := cli.Txn(ctx).If(g.Cmps...).Then(g.Ops...).Commit(); err != nil {
					t.Fatal(err)
				}
			}
			p, err := s.PlanServers(ctx, project, "req", c.reqs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Alone, c.alone) {
				t.Errorf("alone %v, want %v", p.Alone, c.alone)
			}
			if want := 1 + map[bool]int{true: 1}[c.fence]; p.Admitted() && len(p.Cmps) != want {
				t.Errorf("%d comparisons, want %d (the set, and the fence when a limit is checked)", len(p.Cmps), want)
			}
			if p.Admitted() {
				resp, err := rawtxn.Commit(ctx, cli, &pb.TxnRequest{Compare: p.Cmps, Success: p.Ops, Failure: p.Refresh})
				if err != nil || !resp.Succeeded {
					t.Fatalf("the share: %v, succeeded %v", err, resp != nil && resp.Succeeded)
				}
				s.PlanCommitted(p, resp.Header.Revision)
			}
		})
	}
}

// TestPlanFencesAsGuards: a plan's share compares and writes the fence
// as a create checked alone does (guardRecorded when a limit is checked
// against the record, guardUnchecked when nothing is limited): the same
// comparison on the wire and the same record written, only the times
// differ.
func TestPlanFencesAsGuards(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/fw")
	for _, c := range []struct {
		project string
		limits  Limits
		checked bool
	}{
		{project: "checked", limits: Limits{Instances: 10, Cores: Unlimited, RAM: Unlimited}, checked: true},
		{project: "unlimited", limits: Limits{Instances: Unlimited, Cores: Unlimited, RAM: Unlimited}},
	} {
		t.Run(c.project, func(t *testing.T) {
			project := c.project
			s := New(cli, keys, c.limits, nil)
			// A counted create leaves a record of 1 to check against.
			_, g, err := s.ReserveServers(ctx, ServerRequest{Project: project, User: "u", Min: 1, Max: 1, VCPUs: 1, RAMMB: 512})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cli.Txn(ctx).If(g.Cmps...).Then(g.Ops...).Commit(); err != nil {
				t.Fatal(err)
			}
			st, err := s.readState(ctx, project, "")
			if err != nil {
				t.Fatal(err)
			}
			p, err := s.PlanServers(ctx, project, "req", []ServerRequest{{Project: project, User: "u", Min: 2, Max: 2, VCPUs: 2, RAMMB: 256}})
			if err != nil {
				t.Fatal(err)
			}
			want := s.guardUnchecked(project, "req")
			if c.checked {
				want = s.guardRecorded(project, "req", st, charge{instances: 2, cores: 4, ram: 512})
			}
			if len(p.Cmps) != 1+len(want.Cmps) || len(p.Ops) != 1 || len(want.Ops) != 1 {
				t.Fatalf("plan: %d compares, %d ops; guard: %d compares, %d ops", len(p.Cmps), len(p.Ops), len(want.Cmps), len(want.Ops))
			}
			for i := range want.Cmps {
				if got := p.Cmps[1+i]; !proto.Equal(got, want.Cmps[i].GetCompare()) {
					t.Errorf("fence compare: plan %v, guard %v", got, want.Cmps[i].GetCompare())
				}
			}
			put := p.Ops[0].GetRequestPut()
			if put == nil || string(put.Key) != string(want.Ops[0].KeyBytes()) || !want.Ops[0].IsPut() {
				t.Fatalf("fence write: plan %v, guard key %q", p.Ops[0], want.Ops[0].KeyBytes())
			}
			var got, exp etcdschema.QuotaFence
			if err := etcdschema.Decode("plan", put.Value, &got); err != nil {
				t.Fatal(err)
			}
			if err := etcdschema.Decode("guard", want.Ops[0].ValueBytes(), &exp); err != nil {
				t.Fatal(err)
			}
			got.At = exp.At
			if etcdschema.MustEncode(&got) != etcdschema.MustEncode(&exp) {
				t.Errorf("fence written: plan %+v, guard %+v", got, exp)
			}
		})
	}
}
