package placement

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/metrics"
)

// racingKV is the real etcd KV with one real concurrent writer: when
// armed, just before the next transaction with compares (a claim) is sent,
// it rewrites key unchanged, which moves its mod revision as another
// claim would.
type racingKV struct {
	clientv3.KV
	key   string
	armed *atomic.Bool
}

func (k racingKV) Txn(ctx context.Context) clientv3.Txn {
	return &racingTxn{Txn: k.KV.Txn(ctx), k: k, ctx: ctx}
}

type racingTxn struct {
	clientv3.Txn
	k       racingKV
	ctx     context.Context
	compare bool
}

func (t *racingTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.compare = t.compare || len(cs) > 0
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *racingTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *racingTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

func (t *racingTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.compare && t.k.armed.CompareAndSwap(true, false) {
		resp, err := t.k.KV.Get(t.ctx, t.k.key)
		if err != nil || len(resp.Kvs) != 1 {
			return nil, errors.Join(errors.New("racing write: read provider"), err)
		}
		if _, err := t.k.KV.Put(t.ctx, t.k.key, string(resp.Kvs[0].Value)); err != nil {
			return nil, err
		}
	}
	return t.Txn.Commit()
}

// TestClaimMetrics: a claim that loses one race is retried and committed
// (one conflict, one committed claim); one over capacity is rejected.
func TestClaimMetrics(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/test")
	var armed atomic.Bool
	cli.KV = racingKV{KV: cli.KV, key: keys.Provider("rp"), armed: &armed}
	s := startOn(t, cli)
	m := metrics.New()
	s.SetMetrics(m)
	ctx := testCtx(t)
	mkProvider(t, s, "rp", "", map[string]etcdschema.Inventory{VCPU: inv(4)})

	armed.Store(true)
	if err := s.PutAllocations(ctx, "c1", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 1})}); err != nil {
		t.Fatal(err)
	}
	if armed.Load() {
		t.Fatal("the racing write never ran")
	}
	err := s.PutAllocations(ctx, "c2", AllocationWrite{Allocations: alloc("rp", map[string]int64{VCPU: 9})})
	if !errors.Is(err, ErrInsufficientCapacity) {
		t.Fatalf("over capacity: %v", err)
	}

	got := map[string]float64{}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			switch mf.GetName() {
			case "berth_placement_claims_total":
				got[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
			case "berth_placement_claim_conflicts_total":
				got["conflicts"] = mt.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{metrics.ClaimCommitted: 1, metrics.ClaimRejected: 1, metrics.ClaimConflict: 0,
		metrics.ClaimGuardFailed: 0, metrics.ClaimError: 0, "conflicts": 1}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
