package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

func newRenewer(t *testing.T, cli *clientv3.Client, timeout time.Duration) *LeaseRenewer {
	t.Helper()
	r, err := NewLeaseRenewer(cli, timeout, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func grant(t *testing.T, cli *clientv3.Client, ttl int64) clientv3.LeaseID {
	t.Helper()
	resp, err := cli.Grant(context.Background(), ttl)
	if err != nil {
		t.Fatalf("grant: %v", err)
	}
	return resp.ID
}

// ttlLeft is the lease's remaining TTL as etcd reports it (-1: gone).
func ttlLeft(t *testing.T, cli *clientv3.Client, id clientv3.LeaseID) int64 {
	t.Helper()
	resp, err := cli.TimeToLive(context.Background(), id)
	if err != nil {
		t.Fatalf("time to live of %x: %v", int64(id), err)
	}
	return resp.TTL
}

// TestLeaseRenewerKeepsLeasesAliveOnOneStream renews 100 leases of a 2 s
// TTL every 500 ms for three TTLs over a networked client: every beat is
// answered with the lease's TTL, all on the one stream, and the leases
// outlive their TTL three times over, while a lease granted alongside and
// left alone expires (the test would see the renewer do nothing).
func TestLeaseRenewerKeepsLeasesAliveOnOneStream(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	r := newRenewer(t, cli, 2*time.Second)
	const n, ttl = 100, 2
	ids := make([]clientv3.LeaseID, n)
	for i := range ids {
		ids[i] = grant(t, cli, ttl)
	}
	unrenewed := grant(t, cli, ttl)
	ctx := context.Background()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(3 * ttl * time.Second)
	expired := false
	for beat := 0; time.Now().Before(end); beat++ {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := r.Renew(ctx, id)
				if err == nil && got != ttl {
					err = fmt.Errorf("lease %x answered TTL %d, want %d", int64(id), got, ttl)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("beat %d: %v", beat, err)
		}
		expired = expired || ttlLeft(t, cli, unrenewed) < 0
		<-tick.C
	}
	if !expired {
		t.Fatal("the lease left alone did not expire within three TTLs: the check cannot tell")
	}
	for _, id := range ids {
		if left := ttlLeft(t, cli, id); left <= 0 {
			t.Fatalf("lease %x expired though renewed (TTL left %d)", int64(id), left)
		}
	}
	if got := r.Opened(); got != 1 {
		t.Fatalf("%d streams opened for %d leases, want 1", got, n)
	}
}

// TestLeaseRenewerMatchesAnswersByLease renews 500 leases of distinct
// TTLs from 64 goroutines at once, several beats of one lease in flight
// together: each beat gets its own lease's answer.
func TestLeaseRenewerMatchesAnswersByLease(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	r := newRenewer(t, cli, 10*time.Second)
	const n = 500
	ids := make([]clientv3.LeaseID, n)
	ttls := make(map[clientv3.LeaseID]int64, n)
	for i := range ids {
		ttl := int64(60 + i%500)
		ids[i] = grant(t, cli, ttl)
		ttls[ids[i]] = ttl
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Worker w renews a quarter of the leases from its own
			// starting point, and lease 0 every eighth beat (beats of one
			// lease in flight together).
			for k := 0; k < n/4; k++ {
				id := ids[(w*97+k)%n]
				if k%8 == 0 {
					id = ids[0]
				}
				got, err := r.Renew(ctx, id)
				if err == nil && got != ttls[id] {
					err = fmt.Errorf("lease %x answered TTL %d, want its own %d", int64(id), got, ttls[id])
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := r.Opened(); got != 1 {
		t.Fatalf("%d streams opened, want 1", got)
	}
}

// TestLeaseRenewerReportsARevokedLeaseLost: etcd's answer for a lease it
// no longer has (TTL 0) is ErrLeaseLost, and the stream goes on serving
// the other leases.
func TestLeaseRenewerReportsARevokedLeaseLost(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	r := newRenewer(t, cli, 5*time.Second)
	ctx := context.Background()
	gone, kept := grant(t, cli, 60), grant(t, cli, 60)
	if _, err := cli.Revoke(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Renew(ctx, gone); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("renew a revoked lease: %v, want ErrLeaseLost", err)
	}
	if ttl, err := r.Renew(ctx, kept); err != nil || ttl != 60 {
		t.Fatalf("renew a live lease after a lost one: %d, %v", ttl, err)
	}
}

// TestAgentLivenessRegrantsARevokedLease: a running agent whose lease is
// revoked (as etcd does when it expires) finds it lost on its next beat
// and writes its alive key again under a new lease.
func TestAgentLivenessRegrantsARevokedLease(t *testing.T) {
	cli, keys, _, _ := startAgent(t, FakeConfig{})
	ctx := context.Background()
	aliveLease := func() clientv3.LeaseID {
		resp, err := cli.Get(ctx, keys.Alive("h1"))
		if err != nil || len(resp.Kvs) != 1 {
			return 0
		}
		return clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	var first clientv3.LeaseID
	testwait.Until(t, "the alive key", func() bool { first = aliveLease(); return first != 0 })
	if _, err := cli.Revoke(ctx, first); err != nil {
		t.Fatal(err)
	}
	var second clientv3.LeaseID
	testwait.Until(t, "the alive key written again under a new lease after the old one was revoked",
		func() bool { second = aliveLease(); return second != 0 && second != first })
	if left := ttlLeft(t, cli, second); left <= 0 {
		t.Fatalf("new lease %x has TTL %d", int64(second), left)
	}
}

// TestLeaseRenewerSurvivesEtcdRestart stops the etcd member under a
// renewer (a networked client, as a real agent's) and starts it again
// from its data: a beat during the outage fails within the timeout, and
// once etcd is back beats are answered again on a new stream, the lease
// kept.
func TestLeaseRenewerSurvivesEtcdRestart(t *testing.T) {
	member := startRestartable(t)
	cli := member.cli
	const timeout = time.Second
	r := newRenewer(t, cli, timeout)
	ctx := context.Background()
	id := grant(t, cli, 60)
	if _, err := r.Renew(ctx, id); err != nil {
		t.Fatalf("renew before the restart: %v", err)
	}
	member.stop()
	start := time.Now()
	if _, err := r.Renew(ctx, id); err == nil {
		t.Fatal("a beat was answered with etcd stopped")
	}
	if took := time.Since(start); took > timeout+500*time.Millisecond {
		t.Fatalf("a beat with etcd down took %s, past its %s timeout", took, timeout)
	}
	member.start(t)
	testwait.Poll(t, 30*time.Second, "a beat answered after the restart", func() (bool, string) {
		ttl, err := r.Renew(ctx, id)
		if errors.Is(err, ErrLeaseLost) {
			t.Fatalf("beats after the restart: %d, %v", ttl, err)
		}
		return err == nil && ttl == 60, fmt.Sprintf("ttl %d, error %v", ttl, err)
	})
	if got := r.Opened(); got < 2 {
		t.Fatalf("%d streams opened across a restart, want a new one", got)
	}
}

// TestLeaseRenewerInProcessAndCloseLeavesNothing renews on the in-process
// client (berth dev, an all-in-one server) and on a networked one, closes
// the renewers, and checks
// that no goroutine of theirs, of their streams or of etcd's side of the
// streams is left.
func TestLeaseRenewerInProcessAndCloseLeavesNothing(t *testing.T) {
	srv, netCli := etcdtest.NetClient(t)
	for name, cli := range map[string]*clientv3.Client{"in-process": srv.Client(), "networked": netCli} {
		t.Run(name, func(t *testing.T) {
			r, err := NewLeaseRenewer(cli, 5*time.Second, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			id := grant(t, cli, 30)
			for i := 0; i < 10; i++ {
				if ttl, err := r.Renew(ctx, id); err != nil || ttl != 30 {
					t.Fatalf("renew: %d, %v", ttl, err)
				}
			}
			if n := streamGoroutines(); n == 0 {
				t.Fatal("no renewer or keepalive goroutine seen while open: the leak check cannot tell")
			}
			r.Close()
			if _, err := r.Renew(ctx, id); !errors.Is(err, ErrRenewerClosed) {
				t.Fatalf("renew after Close: %v, want ErrRenewerClosed", err)
			}
			testwait.Poll(t, 10*time.Second, "no goroutine left after Close", func() (bool, string) {
				if streamGoroutines() == 0 {
					return true, ""
				}
				return false, "goroutines left:\n" + streamStacks()
			})
		})
	}
}

// streamStacks are the stacks of the goroutines of a renewer and of
// either side of a LeaseKeepAlive stream.
func streamStacks() string {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "agent.(*LeaseRenewer)") || strings.Contains(g, "agent.(*renewStream)") ||
			strings.Contains(g, "LeaseKeepAlive") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

func streamGoroutines() int {
	s := streamStacks()
	if s == "" {
		return 0
	}
	return strings.Count(s, "goroutine ")
}

// TestRenewAliveKeepsTheLeaseWhenUnanswered: a beat that gets no answer
// (the connection to etcd stopped passing anything on) fails by the
// renewer's timeout and leaves the host on its lease for the next beat:
// it does not try to grant a new lease, which would wait on the same
// silent connection (here until the test's 5 s deadline).
func TestRenewAliveKeepsTheLeaseWhenUnanswered(t *testing.T) {
	srv, p, cli := frozenProxyClient(t)
	keys := etcdschema.New("/t")
	a, err := New(Config{Host: "h1", Cell: "cell1", ReportInterval: time.Second},
		cli, keys, placement.New(cli, keys, hclog.NewNullLogger()), NewFakeDriver("h1", FakeConfig{}), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	r := newRenewer(t, cli, 500*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lease, err := a.GrantAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.set(true)
	start := time.Now()
	got, err := a.RenewAlive(ctx, r, lease)
	if err == nil || got != lease {
		t.Fatalf("unanswered beat: lease %x, %v; want the same lease %x and an error", int64(got), err, int64(lease))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("unanswered beat took %s, past its 500ms timeout", took)
	}
	p.set(false)
	if left := ttlLeft(t, srv.Client(), lease); left <= 0 {
		t.Fatalf("the host's lease is gone after an unanswered beat (TTL %d)", left)
	}
}

// freezeProxy forwards loopback TCP connections to target; while frozen
// it holds what it reads instead of passing it on, as a half-open
// connection or a member that stopped answering would.
type freezeProxy struct {
	l      net.Listener
	mu     sync.Mutex
	frozen bool
	thaw   chan struct{}
	conns  []net.Conn
}

func newFreezeProxy(t *testing.T, target string) *freezeProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{l: l, thaw: make(chan struct{})}
	close(p.thaw)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.set(false)
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); p.pipe(out, in) }()
			go func() { defer wg.Done(); p.pipe(in, out) }()
		}
	}()
	return p
}

func (p *freezeProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			thaw := p.thaw
			p.mu.Unlock()
			<-thaw
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *freezeProxy) set(frozen bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if frozen == p.frozen {
		return
	}
	p.frozen = frozen
	if frozen {
		p.thaw = make(chan struct{})
	} else {
		close(p.thaw)
	}
}

// TestLeaseRenewerReopensAStalledStream: a connection that stops passing
// anything on (no error, no close) leaves a beat unanswered; the beat
// fails by its timeout, the silent stream is taken as stalled and a new
// one opened, and once the connection passes data again beats are
// answered.
func TestLeaseRenewerReopensAStalledStream(t *testing.T) {
	_, p, cli := frozenProxyClient(t)
	const timeout = 600 * time.Millisecond
	r := newRenewer(t, cli, timeout)
	ctx := context.Background()
	id := grant(t, cli, 60)
	if _, err := r.Renew(ctx, id); err != nil {
		t.Fatalf("renew before the stall: %v", err)
	}
	p.set(true)
	start := time.Now()
	if _, err := r.Renew(ctx, id); err == nil {
		t.Fatal("a beat was answered through a frozen connection")
	}
	if took := time.Since(start); took > timeout+500*time.Millisecond {
		t.Fatalf("a beat on a stalled stream took %s, past its %s timeout", took, timeout)
	}
	testwait.Until(t, "the stalled stream replaced", func() bool { return r.Opened() >= 2 })
	p.set(false)
	testwait.Poll(t, 10*time.Second, "a beat answered after the stall", func() (bool, string) {
		ttl, err := r.Renew(ctx, id)
		return err == nil && ttl == 60, fmt.Sprintf("ttl %d, error %v", ttl, err)
	})
}

// frozenProxyClient starts an etcd and a client that reaches it through
// a freezeProxy, so a test can stop the connection passing anything on.
func frozenProxyClient(t *testing.T) (*embedetcd.Server, *freezeProxy, *clientv3.Client) {
	t.Helper()
	srv := etcdtest.Start(t)
	u, err := url.Parse(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	p := newFreezeProxy(t, u.Host)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + p.l.Addr().String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return srv, p, cli
}

// TestLeaseRenewerSpreadsLeasesOverStreams renews 200 leases on a
// renewer of four streams: every beat is answered with its lease's TTL,
// four streams are open, and every lane carries some of the leases.
func TestLeaseRenewerSpreadsLeasesOverStreams(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	const streams, n, ttl = 4, 200, 30
	r, err := NewLeaseRenewerStreams(cli, 5*time.Second, streams, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	perLane := map[*renewLane]int{}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		id := grant(t, cli, ttl)
		perLane[r.lane(id)]++
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := r.Renew(context.Background(), id)
			if err == nil && got != ttl {
				err = fmt.Errorf("lease %x answered TTL %d, want %d", int64(id), got, ttl)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := r.Opened(); got != streams {
		t.Fatalf("%d streams opened, want %d", got, streams)
	}
	if len(perLane) != streams {
		t.Fatalf("leases beat on %d of %d lanes: %v", len(perLane), streams, perLane)
	}
	for _, c := range perLane {
		if c < n/streams/3 {
			t.Fatalf("lanes unevenly used: %v", perLane)
		}
	}
	if _, err := NewLeaseRenewerStreams(cli, time.Second, 0, hclog.NewNullLogger()); err == nil {
		t.Fatal("a renewer of 0 streams was made")
	}
}

// TestLeaseRenewerStalledStreamHoldsUpOnlyItsLane stops the answers of
// the first stream a two-stream renewer opens (as etcd holds a stream's
// answers while it revokes an expired lease renewed on it): beats of the
// leases on the other lane are answered at once meanwhile, the stalled
// lane's beat fails by its timeout, and its stream is replaced.
func TestLeaseRenewerStalledStreamHoldsUpOnlyItsLane(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	lc := &stallFirstStream{LeaseClient: pb.NewLeaseClient(cli.ActiveConnection()), release: make(chan struct{})}
	const timeout = 800 * time.Millisecond
	r, err := newLeaseRenewer(lc, timeout, 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	t.Cleanup(lc.unstall)
	testwait.Until(t, "both streams open", func() bool { return r.Opened() == 2 })
	var stalled, free []clientv3.LeaseID
	for len(stalled) == 0 || len(free) < 20 {
		id := grant(t, cli, 60)
		if r.lane(id) == lc.stalledLane(r) {
			stalled = append(stalled, id)
		} else {
			free = append(free, id)
		}
	}
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := r.Renew(ctx, stalled[0])
		done <- err
	}()
	for _, id := range free {
		start := time.Now()
		if ttl, err := r.Renew(ctx, id); err != nil || ttl != 60 {
			t.Fatalf("beat of lease %x on the working lane: ttl %d, error %v", int64(id), ttl, err)
		}
		if took := time.Since(start); took > timeout/2 {
			t.Fatalf("a beat on the working lane took %s while the other lane stalled", took)
		}
	}
	if err := <-done; err == nil {
		t.Fatal("the beat on the stalled stream was answered: the stall did not hold")
	}
	testwait.Until(t, "the stalled stream replaced", func() bool { return r.Opened() >= 3 })
}

// stallFirstStream is etcd's lease client whose first keepalive stream
// delivers no answers until released.
type stallFirstStream struct {
	pb.LeaseClient
	mu      sync.Mutex
	opened  int
	first   pb.Lease_LeaseKeepAliveClient
	release chan struct{}
	once    sync.Once
}

func (c *stallFirstStream) LeaseKeepAlive(ctx context.Context, opts ...grpc.CallOption) (pb.Lease_LeaseKeepAliveClient, error) {
	st, err := c.LeaseClient.LeaseKeepAlive(ctx, opts...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opened++
	if c.opened == 1 {
		st = &stalledRecv{Lease_LeaseKeepAliveClient: st, release: c.release}
		c.first = st
	}
	return st, nil
}

// stalledLane is the lane whose current stream is the stalled one.
func (c *stallFirstStream) stalledLane(r *LeaseRenewer) *renewLane {
	c.mu.Lock()
	first := c.first
	c.mu.Unlock()
	for _, l := range r.lanes {
		l.mu.Lock()
		cur := l.cur
		l.mu.Unlock()
		if cur != nil && cur.st == first {
			return l
		}
	}
	return nil
}

func (c *stallFirstStream) unstall() { c.once.Do(func() { close(c.release) }) }

type stalledRecv struct {
	pb.Lease_LeaseKeepAliveClient
	release chan struct{}
}

func (s *stalledRecv) Recv() (*pb.LeaseKeepAliveResponse, error) {
	select {
	case <-s.release:
	case <-s.Context().Done():
		return nil, s.Context().Err()
	}
	return s.Lease_LeaseKeepAliveClient.Recv()
}

// restartableEtcd is a member on loopback ports of its own, which a test
// stops and starts again from its data, and a networked client to it (as
// a real agent's); both are closed when the test ends.
type restartableEtcd struct {
	cfg embedetcd.Config
	srv *embedetcd.Server
	cli *clientv3.Client
}

func startRestartable(t *testing.T) *restartableEtcd {
	t.Helper()
	e := &restartableEtcd{cfg: embedetcd.Config{DataDir: t.TempDir(),
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t)),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))}}
	e.start(t)
	t.Cleanup(func() { e.stop() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.cfg.ClientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	e.cli = cli
	return e
}

// start starts the member (again) from its data.
func (e *restartableEtcd) start(t *testing.T) {
	t.Helper()
	srv, err := embedetcd.Start(e.cfg)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	e.srv = srv
}

// stop stops the member; a second stop does nothing.
func (e *restartableEtcd) stop() {
	if e.srv != nil {
		e.srv.Close()
		e.srv = nil
	}
}
