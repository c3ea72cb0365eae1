package metrics

import (
	"context"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
)

// TestInstrumentKV: the in-process client (through embedetcd's gate) and a
// networked client are both measured, by operation, errors counted. The get
// with a cancelled context is refused by both clients alike (by the gate,
// by gRPC), and the wrapper counts it as an error.
func TestInstrumentKV(t *testing.T) {
	_, netCli := etcdtest.NetClient(t)
	for name, cli := range map[string]*clientv3.Client{"in-process": etcdtest.Client(t), "networked": netCli} {
		t.Run(name, func(t *testing.T) {
			m := New()
			kv := m.InstrumentKV(cli.KV)
			if _, ok := kv.(rawtxn.Sender); !ok {
				t.Fatal("the timed KV sends no transaction as built")
			}
			ctx := context.Background()
			if _, err := kv.Put(ctx, "/k", "v"); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				if _, err := kv.Get(ctx, "/k"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.Value("/k"), "=", "v")).
				Then(clientv3.OpDelete("/k")).Commit(); err != nil {
				t.Fatal(err)
			}
			if _, err := rawtxn.Commit(ctx, kv, &pb.TxnRequest{Compare: []*pb.Compare{rawtxn.Absent("/k")},
				Success: []*pb.RequestOp{rawtxn.Get("/k")}}); err != nil {
				t.Fatal(err)
			}
			cancelled, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := kv.Get(cancelled, "/k"); err == nil {
				t.Fatal("get with a cancelled context succeeded")
			}
			counts := map[string]uint64{}
			errs := map[string]float64{}
			mfs, err := m.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				for _, mt := range mf.GetMetric() {
					switch mf.GetName() {
					case "berth_etcd_request_duration_seconds":
						counts[mt.GetLabel()[0].GetValue()] = mt.GetHistogram().GetSampleCount()
					case "berth_etcd_request_errors_total":
						errs[mt.GetLabel()[0].GetValue()] = mt.GetCounter().GetValue()
					}
				}
			}
			if counts["put"] != 1 || counts["get"] != 3 || counts["txn"] != 2 || errs["get"] != 1 || errs["put"] != 0 {
				t.Errorf("counts %v, errors %v; want put 1, get 3 (1 error), txn 2 (one sent as built)", counts, errs)
			}
		})
	}
}
