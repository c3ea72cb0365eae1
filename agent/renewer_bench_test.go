package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
)

// BenchmarkLeaseRenewal renews 2,000 leases round-robin from 64
// goroutines over a networked client to an embedded etcd (both sides in
// this process), one beat per op: "keepaliveonce" is clientv3's
// KeepAliveOnce (a gRPC stream per beat, the agent's old beat), "stream"
// the LeaseRenewer's one long-lived stream. cpu-us/op is the process's
// user+system CPU per renewal (getrusage), client and etcd together, so
// it holds on a loaded machine where ns/op does not; allocs/op count
// both sides too.
func BenchmarkLeaseRenewal(b *testing.B) {
	_, cli := etcdtest.NetClient(b)
	const leases, workers = 2000, 64
	ids := make([]clientv3.LeaseID, leases)
	for i := range ids {
		resp, err := cli.Grant(context.Background(), 600)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = resp.ID
	}
	r, err := NewLeaseRenewer(cli, 10*time.Second, hclog.NewNullLogger())
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for _, bc := range []struct {
		name  string
		renew func(ctx context.Context, id clientv3.LeaseID) error
	}{
		{"keepaliveonce", func(ctx context.Context, id clientv3.LeaseID) error {
			_, err := cli.KeepAliveOnce(ctx, id)
			return err
		}},
		{"stream", func(ctx context.Context, id clientv3.LeaseID) error {
			_, err := r.Renew(ctx, id)
			return err
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			var next atomic.Int64
			var failed atomic.Value
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			var wg sync.WaitGroup
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						k := next.Add(1) - 1
						if k >= int64(b.N) {
							return
						}
						if err := bc.renew(ctx, ids[k%leases]); err != nil {
							failed.Store(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			cpu := processCPU(b) - cpu0
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}

// processCPU is the process's user+system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
