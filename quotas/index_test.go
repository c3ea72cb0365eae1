package quotas

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/etcdtest"
)

// testFence is a leader's fence for BuildIndex: a key that exists, at
// the revision it was created.
func testFence(t testing.TB, cli *clientv3.Client, keys etcdschema.Keys) clientv3.Cmp {
	t.Helper()
	key := keys.All() + "test-fence"
	resp, err := cli.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 1 {
		return clientv3.Compare(clientv3.CreateRevision(key), "=", resp.Kvs[0].CreateRevision)
	}
	put, err := cli.Put(context.Background(), key, "leader")
	if err != nil {
		t.Fatal(err)
	}
	return clientv3.Compare(clientv3.CreateRevision(key), "=", put.Header.Revision)
}

// TestCountFromTheIndex follows a deployment through its upgrade to the
// per-project index: records of an older Berth are counted from every
// mapping until the leader builds the index; then the index is read,
// creates and deletes keep it, and whatever an older Berth still does
// (a create that leaves no entry, a delete that leaves one) is counted
// right at once and repaired by the next build.
func TestCountFromTheIndex(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/qi")
	ctx := context.Background()
	tiny := etcdschema.Flavor{Name: "m1.tiny", VCPUs: 1, RAMMB: 512}
	old := func(uuid, project string) {
		t.Helper()
		if _, err := cli.Txn(ctx).Then(seedPlacedOps(keys, uuid, project, tiny)...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	s := New(cli, keys, Limits{Instances: 100}, nil)
	count := func(project string) int64 {
		t.Helper()
		u, _, err := s.Count(ctx, project, "")
		if err != nil {
			t.Fatal(err)
		}
		return u.Instances
	}
	stale := func() bool {
		t.Helper()
		st, _, err := IndexStale(ctx, cli, keys)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	build := func() IndexBuild {
		t.Helper()
		b, err := BuildIndex(ctx, cli, keys, testFence(t, cli, keys), "test")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	entries := func() int64 {
		t.Helper()
		resp, err := cli.Get(ctx, keys.QuotaInstancesAll(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Count
	}

	// An older Berth's servers: no index, counted from every mapping.
	for _, u := range []string{"a1", "a2", "a3"} {
		old(u, "a")
	}
	old("b1", "b")
	if n := count("a"); n != 3 || !stale() {
		t.Fatalf("before the index: a counts %d (want 3), stale %v (want true)", n, stale())
	}
	if b := build(); b.Added != 4 || b.Removed != 0 || b.Revision == 0 {
		t.Fatalf("first build: %+v, want the 4 servers indexed", b)
	}
	if n := count("a"); n != 3 || stale() || entries() != 4 {
		t.Fatalf("after the build: a counts %d (want 3), stale %v, %d entries (want 4)", n, stale(), entries())
	}
	if b := build(); b.Added != 0 || b.Removed != 0 {
		t.Errorf("a second build changed %+v, want nothing (idempotent)", b)
	}

	// A create as servers.Create makes it: mapping, entry and the fenced
	// guard in one transaction.
	_, g, err := s.ReserveServers(ctx, ServerRequest{Project: "a", Min: 1, Max: 1, VCPUs: 1, RAMMB: 512})
	if err != nil {
		t.Fatal(err)
	}
	ops := append(seedPlacedOps(keys, "a4", "a", tiny), clientv3.OpPut(keys.QuotaInstance("a", "a4"),
		etcdschema.MustEncode(&etcdschema.QuotaInstance{})))
	if resp, err := cli.Txn(ctx).If(g.Cmps...).Then(append(ops, g.Ops...)...).Commit(); err != nil || !resp.Succeeded {
		t.Fatalf("create a4: %v", err)
	}
	// A delete as the agent makes it: every record, the entry too.
	if _, err := cli.Txn(ctx).Then(records.DeleteInstance(keys, "cell1", "", "a1", "a")...).Commit(); err != nil {
		t.Fatal(err)
	}
	if n := count("a"); n != 3 || stale() {
		t.Fatalf("after a create and a delete: a counts %d (want 3), stale %v (want false)", n, stale())
	}

	// An older Berth still running beside: its create leaves no entry but
	// moves a's fence without "indexed": a is counted from every mapping.
	old("a5", "a")
	if _, err := cli.Put(ctx, keys.QuotaFence("a"), etcdschema.MustEncode(&etcdschema.QuotaFence{RequestID: "req-old"})); err != nil {
		t.Fatal(err)
	}
	// Its delete leaves b1's entry behind: b is still counted right.
	if _, err := cli.Txn(ctx).Then(clientv3.OpDelete(keys.InstanceMapping("b1")), clientv3.OpDelete(keys.CellInstance("cell1", "b1"))).Commit(); err != nil {
		t.Fatal(err)
	}
	if na, nb := count("a"), count("b"); na != 4 || nb != 0 || !stale() {
		t.Fatalf("with an older Berth's writes: a counts %d (want 4), b %d (want 0), stale %v (want true)", na, nb, stale())
	}
	if b := build(); b.Added != 1 || b.Removed != 1 {
		t.Fatalf("the repairing build: %+v, want a5 added and b1's entry removed", b)
	}
	if na, nb := count("a"), count("b"); na != 4 || nb != 0 || stale() || entries() != 4 {
		t.Fatalf("after the repair: a %d (want 4), b %d (want 0), stale %v, %d entries (want 4)", na, nb, stale(), entries())
	}

	// A former leader's build writes nothing.
	old("c1", "c")
	lost := clientv3.Compare(clientv3.CreateRevision(keys.All()+"no-such-fence"), ">", 0)
	if _, err := BuildIndex(ctx, cli, keys, lost, "former"); !errors.Is(err, ErrFenceLost) || entries() != 4 {
		t.Errorf("a build under a lost fence: %v with %d entries, want ErrFenceLost and still 4", err, entries())
	}
}
