package agent

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// castCarrying does what the hand-off does since the cast carries the
// instance and the alternates: claim, then the instance record and a
// cast carrying that record's bytes (and the alternates) in one
// transaction.
func castCarrying(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys, p *placement.Service, a *Agent, uuid string) {
	t.Helper()
	ctx := context.Background()
	err := p.PutAllocations(ctx, uuid, placement.AllocationWrite{ProjectID: "p", UserID: "u",
		Allocations: map[string]placement.ProviderAllocation{a.ProviderUUID(): {Resources: map[string]int64{"VCPU": 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	inst := etcdschema.MustEncode(&etcdschema.Instance{UUID: uuid, Name: "x", Status: etcdschema.StatusBuild, Host: "h1", Cell: "cell1"})
	alts := etcdschema.MustEncode(&etcdschema.Alternates{InstanceUUID: uuid, Cell: "cell1", MaxAttempts: 3,
		Attempts:  []etcdschema.Attempt{{Host: "h1", At: time.Now().UTC()}},
		Remaining: []etcdschema.Selection{{ServiceHost: "h2", Nodename: "h2", Cell: "cell1"}}})
	b := &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: uuid, Cell: "cell1", Attempt: 1,
		Instance: json.RawMessage(inst), Alternates: json.RawMessage(alts)}
	if _, err := cli.Txn(ctx).Then(
		clientv3.OpPut(keys.CellInstance("cell1", uuid), inst),
		clientv3.OpPut(keys.Build("h1", uuid), etcdschema.MustEncode(b))).Commit(); err != nil {
		t.Fatal(err)
	}
}

func exists(t *testing.T, cli *clientv3.Client, key string) bool {
	t.Helper()
	resp, err := cli.Get(context.Background(), key, clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count > 0
}

// TestAgentBuildsFromTheCarriedInstance: a cast carrying its instance is
// built from that copy; when the record changed after the cast was
// written (a rename while the build waited or ran), the outcome
// transaction's compare catches it and the agent records ACTIVE over the
// record as it is now, keeping the change, for a cast without the copy
// (an older Berth's, the instance read) as well.
func TestAgentBuildsFromTheCarriedInstance(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		carried bool
		rename  bool
	}{
		{"carried, unchanged", true, false},
		{"carried, renamed while building", true, true},
		{"read (no copy in the cast), renamed while building", false, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cli, keys, p, a := startAgent(t, FakeConfig{BuildTime: 300 * time.Millisecond})
			ctx := context.Background()
			if tc.carried {
				castCarrying(t, cli, keys, p, a, "i1")
			} else {
				cast(t, cli, keys, p, a, "i1")
			}
			if tc.rename {
				testwait.Until(t, "the build of i1 started", func() bool {
					a.mu.Lock()
					defer a.mu.Unlock()
					return a.inFlight["i1"]
				})
				in := instance(t, cli, keys, "i1")
				in.Name = "renamed"
				if _, err := cli.Put(ctx, keys.CellInstance("cell1", "i1"), etcdschema.MustEncode(&in)); err != nil {
					t.Fatal(err)
				}
			}
			testwait.Until(t, "instance i1 ACTIVE", func() bool { return instance(t, cli, keys, "i1").Status == etcdschema.StatusActive })
			testwait.Until(t, "the cast of i1 ended", func() bool { return !exists(t, cli, keys.Build("h1", "i1")) })
			if got := instance(t, cli, keys, "i1"); tc.rename && got.Name != "renamed" {
				t.Errorf("the rename was lost: name %q", got.Name)
			}
		})
	}
}

// TestAgentRetryCarriesTheAlternates: a reschedulable failure files a
// retry carrying the cast's alternates (what the cell conductor tries
// next) but not its stale copy of the instance.
func TestAgentRetryCarriesTheAlternates(t *testing.T) {
	cli, keys, p, a := startAgent(t, FakeConfig{Fail: true, FailReschedulable: true})
	ctx := context.Background()
	castCarrying(t, cli, keys, p, a, "i2")
	var retry etcdschema.Retry
	testwait.Until(t, "a retry filed for i2", func() bool {
		resp, err := cli.Get(ctx, keys.Retry("cell1", "i2"))
		if err != nil || len(resp.Kvs) != 1 {
			return false
		}
		return etcdschema.Decode("retry", resp.Kvs[0].Value, &retry) == nil
	})
	alts, ok, err := retry.Build.CarriedAlternates("retry")
	if err != nil || !ok || len(alts.Remaining) != 1 || alts.Remaining[0].ServiceHost != "h2" || alts.MaxAttempts != 3 {
		t.Fatalf("alternates in the retry: %+v, %v, %v", alts, ok, err)
	}
	if retry.Build.CarriesInstance() {
		t.Errorf("the retry carries the cast's copy of the instance: %s", retry.Build.Instance)
	}
}

// TestAgentDeletesAnOlderBerthsAlternates: a cast without alternates
// (an older Berth's hand-off) beside an alternates key: ACTIVE deletes
// the key, as before; a cast carrying them leaves any such key alone
// (none is written beside it).
func TestAgentDeletesAnOlderBerthsAlternates(t *testing.T) {
	cli, keys, p, a := startAgent(t, FakeConfig{})
	ctx := context.Background()
	for _, id := range []string{"old", "new"} {
		if _, err := cli.Put(ctx, keys.Alternates(id), etcdschema.MustEncode(&etcdschema.Alternates{InstanceUUID: id, Cell: "cell1"})); err != nil {
			t.Fatal(err)
		}
	}
	cast(t, cli, keys, p, a, "old")
	castCarrying(t, cli, keys, p, a, "new")
	for _, id := range []string{"old", "new"} {
		testwait.Until(t, "instance "+id+" ACTIVE", func() bool { return instance(t, cli, keys, id).Status == etcdschema.StatusActive })
	}
	if exists(t, cli, keys.Alternates("old")) {
		t.Error("the older Berth's alternates key outlived ACTIVE")
	}
	if !exists(t, cli, keys.Alternates("new")) {
		t.Error("a key beside a cast carrying the alternates was deleted: the agent wrote an op it need not")
	}
}
