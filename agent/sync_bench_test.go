package agent

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/placement"
)

// requestCount counts the requests sent through its KV (a transaction is
// one, whatever it holds): each is a round trip to etcd.
type requestCount struct {
	clientv3.KV
	n int
}

func (c *requestCount) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.n++
	return c.KV.Get(ctx, key, opts...)
}

func (c *requestCount) Put(ctx context.Context, key, val string, opts ...clientv3.OpOption) (*clientv3.PutResponse, error) {
	c.n++
	return c.KV.Put(ctx, key, val, opts...)
}

func (c *requestCount) Txn(ctx context.Context) clientv3.Txn {
	c.n++
	return c.KV.Txn(ctx)
}

func (c *requestCount) SendTxn(ctx context.Context, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	c.n++
	return rawtxn.Commit(ctx, c.KV, r)
}

// syncedHost is a registered, mapped host with instances instances
// (records and instance info), as a fleet's host is between builds.
func syncedHost(tb testing.TB, cli *clientv3.Client, instances int) *Agent {
	tb.Helper()
	ctx := context.Background()
	keys := etcdschema.New("/t")
	a, err := New(Config{Host: "h1", Cell: "cell1", ReportInterval: time.Second, TrackInstanceChanges: true,
		Inventory: Inventory{VCPUs: 64, MemoryMB: 65536, DiskGB: 1000}},
		cli, keys, placement.New(cli, keys, hclog.NewNullLogger()), NewFakeDriver("h1", FakeConfig{}), hclog.NewNullLogger())
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := cli.Put(ctx, keys.Cell("cell1"), etcdschema.MustEncode(&etcdschema.Cell{Name: "cell1", UUID: "c1"})); err != nil {
		tb.Fatal(err)
	}
	f := etcdschema.Flavor{ID: "2", Name: "m", VCPUs: 2, RAMMB: 1024, DiskGB: 1}
	for i := range instances {
		u := fmt.Sprintf("00000000-0000-0000-0000-%012d", i)
		if _, err := cli.Txn(ctx).Then(
			clientv3.OpPut(keys.CellInstance("cell1", u), etcdschema.MustEncode(&etcdschema.Instance{
				UUID: u, Cell: "cell1", Host: "h1", Status: etcdschema.StatusActive, Flavor: f})),
			clientv3.OpPut(keys.HostInstance("h1", u), etcdschema.MustEncode(&etcdschema.InstanceInfo{
				UUID: u, Host: "h1", FlavorID: f.ID, Flavor: f.Name}))).Commit(); err != nil {
			tb.Fatal(err)
		}
	}
	if err := a.Register(ctx); err != nil {
		tb.Fatal(err)
	}
	// Up, as a fleet host is before its periodic syncs: the service
	// record is written with the alive key.
	if _, err := a.GrantAlive(ctx); err != nil {
		tb.Fatal(err)
	}
	return a
}

// TestProviderTickRoundTrips: an idle provider sync of a mapped host
// with instances makes two round trips to etcd (its reads, the instance
// records) and writes nothing; once the provider refresh is due, a third
// (Placement's read of the provider); one of an unmapped host maps it.
func TestProviderTickRoundTrips(t *testing.T) {
	cli := etcdtest.Client(t)
	a := syncedHost(t, cli, 3)
	c := &requestCount{KV: cli.KV}
	cli.KV = c
	ctx := context.Background()
	rev := func() int64 {
		t.Helper()
		resp, err := c.KV.Get(ctx, "/")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	before := rev()
	if syncErr, mapErr := a.providerTick(ctx); syncErr != nil || mapErr != nil {
		t.Fatal(syncErr, mapErr)
	}
	if c.n != 2 {
		t.Errorf("an idle provider sync made %d round trips to etcd, want 2", c.n)
	}
	a.seenMu.Lock()
	a.seen.at = a.seen.at.Add(-DefaultProviderRefresh)
	a.seenMu.Unlock()
	c.n = 0
	if syncErr, mapErr := a.providerTick(ctx); syncErr != nil || mapErr != nil {
		t.Fatal(syncErr, mapErr)
	}
	if c.n != 3 {
		t.Errorf("an idle provider sync with the refresh due made %d round trips to etcd, want 3", c.n)
	}
	if after := rev(); after != before {
		t.Errorf("an idle provider sync wrote (revision %d -> %d)", before, after)
	}
	if _, err := cli.Delete(ctx, a.keys.HostMapping("h1")); err != nil {
		t.Fatal(err)
	}
	if syncErr, mapErr := a.providerTick(ctx); syncErr != nil || mapErr != nil {
		t.Fatal(syncErr, mapErr)
	}
	resp, err := cli.Get(ctx, a.keys.HostMapping("h1"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("host mapping after a sync of an unmapped host: %v %v", resp, err)
	}
}

// BenchmarkHostSyncs is one periodic run of a fleet host's provider sync
// ("provider") and instance sync ("instances"), each against a host
// with no instance (most of a large cloud's hosts) and with 4, read from
// etcd or ("-followed") answered from the agent's follow (its mapping
// too: an idle host's provider sync then makes no request), over a
// networked client to an embedded etcd (both in this process), idle
// (nothing to write but the instance sync's list).
// "others=100000" runs them with 100,000 other hosts' mappings and
// service records in etcd (a 100,000-host cloud's index and backend
// depth, where a read of a record from bolt costs most). cpu-us/op is
// the process's user+system CPU per run, client and etcd together;
// allocs/op and B/op count both sides too; requests/op the round trips
// to etcd.
//
//	go test -run '^$' -bench HostSyncs -benchmem -count 5 ./agent
func BenchmarkHostSyncs(b *testing.B) {
	for _, others := range []int{0, 100_000} {
		for _, instances := range []int{0, 4} {
			b.Run(fmt.Sprintf("others=%d/instances=%d", others, instances), func(b *testing.B) {
				_, cli := etcdtest.NetClient(b)
				writeOtherHosts(b, cli, others)
				benchHostSyncs(b, cli, instances)
			})
		}
	}
}

func benchHostSyncs(b *testing.B, cli *clientv3.Client, instances int) {
	a := syncedHost(b, cli, instances)
	// A second agent of the same host whose follow (host_follow.go) runs,
	// as a running agent's does: its syncs answer from it.
	followed := syncedHost(b, cli, instances)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go followed.followInf.Run(ctx)
	go followed.mappingInf.Run(ctx)
	if err := followed.followInf.WaitSynced(ctx); err != nil {
		b.Fatal(err)
	}
	if err := followed.mappingInf.WaitSynced(ctx); err != nil {
		b.Fatal(err)
	}
	c := &requestCount{KV: cli.KV}
	cli.KV = c
	for _, bc := range []struct {
		name string
		run  func() error
	}{
		{"provider", func() error { return a.SyncProvider(ctx) }},
		{"instances", func() error { _, err := a.SyncInstances(ctx); return err }},
		{"provider-followed", func() error { return followed.SyncProvider(ctx) }},
		{"instances-followed", func() error { _, err := followed.SyncInstances(ctx); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			c.n = 0
			cpu0 := processCPU(b)
			for b.Loop() {
				if err := bc.run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
			b.ReportMetric(float64(c.n)/float64(b.N), "requests/op")
		})
	}
}

// writeOtherHosts writes n other hosts' mapping and service records
// under the keys syncedHost's agent uses, 50 hosts a transaction.
func writeOtherHosts(b *testing.B, cli *clientv3.Client, n int) {
	b.Helper()
	keys := etcdschema.New("/t")
	ctx := context.Background()
	for i := 0; i < n; i += 50 {
		var ops []clientv3.Op
		for j := i; j < min(i+50, n); j++ {
			h := fmt.Sprintf("other%06d", j)
			ops = append(ops,
				clientv3.OpPut(keys.HostMapping(h), etcdschema.MustEncode(&etcdschema.HostMapping{Host: h, Cell: "cell1", CreatedAt: time.Now().UTC()})),
				clientv3.OpPut(keys.Service(h), etcdschema.MustEncode(&etcdschema.Service{Host: h, Cell: "cell1", AgentVersion: "bench"})))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
	}
}
