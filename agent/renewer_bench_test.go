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

// BenchmarkLeaseRenewal renews 2,000 leases round-robin through 64
// goroutines over a networked client to an embedded etcd (both sides in
// this process), one beat per op: "keepaliveonce" is clientv3's
// KeepAliveOnce (a gRPC stream per beat, the agent's old beat), "stream"
// the LeaseRenewer's one long-lived stream, "none" no call at all (the
// cost of the harness and of an idle etcd). "burst" renews as fast as the
// goroutines go; "paced" hands out one beat a millisecond (1,000/s, what
// 10,000 hosts at report_interval 10 s send), so each beat travels alone
// as a fleet's do. cpu-us/op is the process's user+system CPU per
// renewal (getrusage), client and etcd together, so it holds on a loaded
// machine where ns/op does not; allocs/op count both sides too.
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
		// No renewal: the pacing, the workers and an idle etcd alone, to
		// subtract from the paced figures.
		{"none", func(context.Context, clientv3.LeaseID) error { return nil }},
		{"keepaliveonce", func(ctx context.Context, id clientv3.LeaseID) error {
			_, err := cli.KeepAliveOnce(ctx, id)
			return err
		}},
		{"stream", func(ctx context.Context, id clientv3.LeaseID) error {
			_, err := r.Renew(ctx, id)
			return err
		}},
	} {
		for _, paced := range []bool{false, true} {
			name := bc.name + "/burst"
			if paced {
				name = bc.name + "/paced"
			}
			b.Run(name, func(b *testing.B) {
				benchRenewals(b, ids, workers, paced, bc.renew)
			})
		}
	}
}

func benchRenewals(b *testing.B, ids []clientv3.LeaseID, workers int, paced bool,
	renew func(ctx context.Context, id clientv3.LeaseID) error) {
	ctx := context.Background()
	var failed atomic.Value
	beats := make(chan clientv3.LeaseID, workers)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range beats {
				if err := renew(ctx, id); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	var tick *time.Ticker
	if paced {
		tick = time.NewTicker(time.Millisecond)
		defer tick.Stop()
	}
	for k := 0; k < b.N; k++ {
		if paced {
			<-tick.C
		}
		beats <- ids[k%len(ids)]
	}
	close(beats)
	wg.Wait()
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
}

// processCPU is the process's user+system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
