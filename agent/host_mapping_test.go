package agent

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

// writingTxns counts the transactions committed through its KV that hold
// a write in either branch: each is a raft proposal, even when its
// compare fails and it writes nothing.
type writingTxns struct {
	clientv3.KV
	n int
}

func (w *writingTxns) Txn(ctx context.Context) clientv3.Txn {
	return &countedTxn{Txn: w.KV.Txn(ctx), w: w}
}

type countedTxn struct {
	clientv3.Txn
	w      *writingTxns
	writes bool
}

func (t *countedTxn) If(cs ...clientv3.Cmp) clientv3.Txn { t.Txn = t.Txn.If(cs...); return t }
func (t *countedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	t.note(ops)
	t.Txn = t.Txn.Then(ops...)
	return t
}
func (t *countedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.note(ops)
	t.Txn = t.Txn.Else(ops...)
	return t
}
func (t *countedTxn) note(ops []clientv3.Op) {
	for _, op := range ops {
		if op.IsPut() || op.IsDelete() || op.IsTxn() {
			t.writes = true
		}
	}
}
func (t *countedTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.writes {
		t.w.n++
	}
	return t.Txn.Commit()
}

// mappingAgent is agent h1 of cell1 (not started) whose client counts
// the transactions that could write.
func mappingAgent(t *testing.T) (*clientv3.Client, etcdschema.Keys, *Agent, *writingTxns) {
	t.Helper()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	a, err := New(Config{Host: "h1", Cell: "cell1", ReportInterval: time.Second,
		Inventory: Inventory{VCPUs: 4, MemoryMB: 4096, DiskGB: 10}},
		cli, keys, placement.New(cli, keys, hclog.NewNullLogger()), NewFakeDriver("h1", FakeConfig{}), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	w := &writingTxns{KV: cli.KV}
	cli.KV = w
	return cli, keys, a, w
}

// TestEnsureHostMappingWritesOnlyWhenUnmapped: the first check maps the
// host; later checks of a mapped host send no transaction that could
// write (a raft proposal each), and a missing cell is still an error.
func TestEnsureHostMappingWritesOnlyWhenUnmapped(t *testing.T) {
	cli, keys, a, w := mappingAgent(t)
	ctx := context.Background()
	if err := a.ensureHostMapping(ctx); err == nil {
		t.Fatal("mapped to a cell that does not exist")
	}
	if _, err := cli.Put(ctx, keys.Cell("cell1"), etcdschema.MustEncode(&etcdschema.Cell{Name: "cell1", UUID: "c1"})); err != nil {
		t.Fatal(err)
	}
	if err := a.ensureHostMapping(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, keys.HostMapping("h1"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("host mapping after the first check: %v %v", resp, err)
	}
	before := w.n
	for range 3 {
		if err := a.ensureHostMapping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if w.n != before {
		t.Fatalf("checks of a mapped host sent %d transactions that could write", w.n-before)
	}
}

// TestProviderTickMapsAnUnmappedHost: the provider sync reads whether the
// host's mapping exists (the compare of its one read) and maps the host
// only when the cell exists and the mapping does not: again after the
// mapping is deleted, and never with a write while it is mapped.
func TestProviderTickMapsAnUnmappedHost(t *testing.T) {
	cli, keys, a, w := mappingAgent(t)
	ctx := context.Background()
	mapped := func() bool {
		t.Helper()
		resp, err := cli.Get(ctx, keys.HostMapping("h1"))
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Kvs) == 1
	}
	if _, mapErr := a.providerTick(ctx); mapErr == nil || mapped() {
		t.Fatalf("tick without the cell: mapping error %v, mapped %v; want an error and no mapping", mapErr, mapped())
	}
	if _, err := cli.Put(ctx, keys.Cell("cell1"), etcdschema.MustEncode(&etcdschema.Cell{Name: "cell1", UUID: "c1"})); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		if _, mapErr := a.providerTick(ctx); mapErr != nil || !mapped() {
			t.Fatalf("round %d: tick with the cell: mapping error %v, mapped %v; want the host mapped", round, mapErr, mapped())
		}
		before := w.n
		if _, mapErr := a.providerTick(ctx); mapErr != nil {
			t.Fatal(mapErr)
		}
		if w.n != before {
			t.Fatalf("round %d: a tick of a mapped host sent %d transactions that could write", round, w.n-before)
		}
		if _, err := cli.Delete(ctx, keys.HostMapping("h1")); err != nil {
			t.Fatal(err)
		}
	}
}
