package bench

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// TestCASBaselineNeverReadsZero: a window shorter than the workers'
// first writes (here 1 ns; on a loaded machine, 300 ms) still measures
// swaps, and the baseline's keys are gone afterwards. The window once
// opened before those writes and closed before any swap: a rate of 0.
func TestCASBaselineNeverReadsZero(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx := context.Background()
	keys := etcdschema.New(etcdschema.DefaultPrefix)
	n, took, err := casRound(ctx, cli, keys, 4, time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	if rate := float64(n) / took.Seconds(); n <= 0 || rate <= 0 {
		t.Fatalf("CAS baseline over 1 ns: %d swaps in %s, want a positive rate", n, took)
	}
	resp, err := cli.Get(ctx, keys.BenchCASPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("%d baseline keys left behind", resp.Count)
	}
}
