package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// asyncAnswer is one RenewAsync's answer.
type asyncAnswer struct {
	ttl int64
	err error
}

// renewAsync sends one asynchronous beat and returns the channel its
// answer arrives on.
func renewAsync(r *LeaseRenewer, id clientv3.LeaseID) <-chan asyncAnswer {
	ch := make(chan asyncAnswer, 1)
	r.RenewAsync(id, func(ttl int64, err error) { ch <- asyncAnswer{ttl, err} })
	return ch
}

// answer waits for an asynchronous beat's answer, failing the test after
// limit.
func answer(t *testing.T, ch <-chan asyncAnswer, limit time.Duration) asyncAnswer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(limit):
		t.Fatalf("no answer to an asynchronous beat within %s", limit)
		return asyncAnswer{}
	}
}

// TestLeaseRenewerRenewAsync: asynchronous beats are answered with their
// lease's TTL (200 at once over four streams, beside synchronous beats of
// the same leases), a revoked lease's with ErrLeaseLost, and after Close
// every beat at once with ErrRenewerClosed.
func TestLeaseRenewerRenewAsync(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	r, err := NewLeaseRenewerStreams(cli, 5*time.Second, 4, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	const n, ttl = 200, 30
	ids := make([]clientv3.LeaseID, n)
	chs := make([]<-chan asyncAnswer, n)
	for i := range ids {
		ids[i] = grant(t, cli, ttl)
	}
	for i, id := range ids {
		chs[i] = renewAsync(r, id)
		if i%10 == 0 {
			if got, err := r.Renew(context.Background(), id); err != nil || got != ttl {
				t.Fatalf("synchronous beat of lease %x beside an asynchronous one: %d, %v", int64(id), got, err)
			}
		}
	}
	for i, ch := range chs {
		if a := answer(t, ch, 10*time.Second); a.err != nil || a.ttl != ttl {
			t.Fatalf("asynchronous beat of lease %x: %d, %v; want %d", int64(ids[i]), a.ttl, a.err, ttl)
		}
	}
	if _, err := cli.Revoke(context.Background(), ids[0]); err != nil {
		t.Fatal(err)
	}
	if a := answer(t, renewAsync(r, ids[0]), 10*time.Second); !errors.Is(a.err, ErrLeaseLost) {
		t.Fatalf("asynchronous beat of a revoked lease: %d, %v; want ErrLeaseLost", a.ttl, a.err)
	}
	r.Close()
	if a := answer(t, renewAsync(r, ids[1]), time.Second); !errors.Is(a.err, ErrRenewerClosed) {
		t.Fatalf("asynchronous beat after Close: %d, %v; want ErrRenewerClosed", a.ttl, a.err)
	}
}

// TestLeaseRenewerAsyncBeatOnAStalledStream: an asynchronous beat on a
// connection that stopped passing anything on fails by the renewer's
// timeout (the lane's sweep), the silent stream is taken as stalled and
// replaced, and once the connection passes data again beats are
// answered.
func TestLeaseRenewerAsyncBeatOnAStalledStream(t *testing.T) {
	_, p, cli := frozenProxyClient(t)
	const timeout = 600 * time.Millisecond
	r := newRenewer(t, cli, timeout)
	id := grant(t, cli, 60)
	if a := answer(t, renewAsync(r, id), 10*time.Second); a.err != nil {
		t.Fatalf("beat before the stall: %v", a.err)
	}
	p.set(true)
	start := time.Now()
	if a := answer(t, renewAsync(r, id), 10*time.Second); a.err == nil {
		t.Fatal("a beat was answered through a frozen connection")
	}
	if took, most := time.Since(start), timeout+sweepEvery(timeout)+500*time.Millisecond; took > most {
		t.Fatalf("a beat on a stalled stream took %s, past its %s timeout and a sweep", took, timeout)
	}
	testwait.Until(t, "the stalled stream replaced", func() bool { return r.Opened() >= 2 })
	p.set(false)
	testwait.Poll(t, 10*time.Second, "a beat answered after the stall", func() (bool, string) {
		a := answer(t, renewAsync(r, id), 10*time.Second)
		return a.err == nil && a.ttl == 60, fmt.Sprintf("ttl %d, error %v", a.ttl, a.err)
	})
}

// TestLeaseRenewerAsyncBeatWaitsForTheNextStream: a beat sent while etcd
// is down waits for the next stream rather than failing at once, and is
// answered on it once etcd is back within the beat's time; one whose time
// passes first fails by its timeout.
func TestLeaseRenewerAsyncBeatWaitsForTheNextStream(t *testing.T) {
	member := startRestartable(t)
	cli := member.cli
	const timeout = 30 * time.Second
	r := newRenewer(t, cli, timeout)
	id := grant(t, cli, 60)
	if a := answer(t, renewAsync(r, id), 10*time.Second); a.err != nil {
		t.Fatalf("beat before the restart: %v", a.err)
	}
	member.stop()
	testwait.Until(t, "the stream broken by the stop", func() bool {
		r.lanes[0].mu.Lock()
		defer r.lanes[0].mu.Unlock()
		return r.lanes[0].cur == nil
	})
	ch := renewAsync(r, id)
	member.start(t)
	if a := answer(t, ch, timeout); a.err != nil || a.ttl != 60 {
		t.Fatalf("beat sent while etcd was down: %d, %v; want it answered after the restart", a.ttl, a.err)
	}
	if got := r.Opened(); got < 2 {
		t.Fatalf("%d streams opened across a restart, want a new one", got)
	}
}
