package workqueue

import (
	"context"
	"fmt"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/informer"
)

// BenchmarkQueueFollowBoot: what one superconductor's queue spends
// following the build requests and their leases per server booted (the
// request's put, a holder's lease put, and the hand-off's deletion of
// both), with three registered holders of which it is one. Every
// superconductor pays it for every request, whoever works it.
func BenchmarkQueueFollowBoot(b *testing.B) { benchQueueFollowBoot(b, false) }

// BenchmarkQueueFollowBootOffering is the same with the queue's timer
// loop running (offerWhenDue) and the default grace, as in a running
// superconductor: the items another holder ranks first for wait in its
// heap, and whatever wakes the loop costs a pass.
func BenchmarkQueueFollowBootOffering(b *testing.B) { benchQueueFollowBoot(b, true) }

func benchQueueFollowBoot(b *testing.B, offering bool) {
	keys := etcdschema.New("/berth")
	q := New(Config{ItemPrefix: keys.BuildRequests(), LeasePrefix: keys.BuildRequestLeases(),
		LeaseKey: keys.BuildRequestLease, HolderPrefix: keys.BuildRequestHolders(), HolderKey: keys.BuildRequestHolder,
		Holder: "berth-1", Grace: DefaultHolderGrace, Log: hclog.NewNullLogger()})
	if offering {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { q.offerWhenDue(ctx); close(done) }()
		defer func() { cancel(); <-done }()
	}
	leaseIDs := holdFirstOfThree(q, keys)
	now := time.Date(2026, 11, 22, 6, 0, 0, 123456789, time.UTC)
	flavor := etcdschema.Flavor{ID: "2", Name: "m1.small", VCPUs: 1, RAMMB: 2048, DiskGB: 20}
	type server struct {
		reqKey, leaseKey string
		req, lease       []byte
	}
	servers := make([]server, 20000)
	for i := range servers {
		id := fmt.Sprintf("6a0c9b1e-0000-4000-8000-%012d", i)
		servers[i] = server{reqKey: keys.BuildRequest(id), leaseKey: keys.BuildRequestLease(id),
			req: []byte(etcdschema.MustEncode(&etcdschema.BuildRequest{InstanceUUID: id, Name: "server-" + id[24:],
				ReservationID: "r-" + id[24:], Count: 1, Flavor: flavor, ProjectID: "bench", UserID: "bench", CreatedAt: now})),
			lease: []byte(etcdschema.MustEncode(&etcdschema.Lease{Holder: "berth-" + strconv.Itoa(i%3+1),
				LeaseID: leaseIDs[i%3], Since: now}))}
	}
	items, leases := itemHandler{q}, leaseHandler{q}
	var rev int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		s := servers[i%len(servers)]
		rev++
		items.Apply([]informer.Event{{Key: s.reqKey, Value: s.req, Revision: rev}})
		rev++
		leases.Apply([]informer.Event{{Key: s.leaseKey, Value: s.lease, Revision: rev}})
		// Our worker takes what was offered to it, as worker does.
		for len(q.work) > 0 {
			q.dequeue(<-q.work)
		}
		rev++
		items.Apply([]informer.Event{{Key: s.reqKey, Deleted: true, Revision: rev}})
		leases.Apply([]informer.Event{{Key: s.leaseKey, Deleted: true, Revision: rev}})
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	if len(q.recs) != 0 {
		b.Fatalf("%d records left after the stream", len(q.recs))
	}
}

// processCPU is the process's user+system CPU time so far: the figure to
// compare on a shared machine, where wall time per op is mostly waiting
// for a core (it includes the GC's background work, a real cost).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
