package leader

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/testwait"
)

// TestLeaderFailoverAndFencing: two candidates with their own etcd
// clients; the leader's session is killed (its lease revoked, as when the
// process dies and the TTL runs out); the other leads within the TTL and
// the old term's fenced writes are refused.
func TestLeaderFailoverAndFencing(t *testing.T) {
	srv, cli1 := etcdtest.NetClient(t)
	cli2, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli2.Close()
	keys := etcdschema.New("/t")
	ctx, cancel := context.WithCancel(context.Background())
	const ttl = 3 * time.Second
	var running []chan struct{}
	defer func() { // stop the candidates before their clients close
		cancel()
		for _, d := range running {
			<-d
		}
	}()
	mk := func(id string, cli *clientv3.Client) *Leader {
		l := New(Config{Client: cli, Keys: keys, Election: testElection, ID: id, TTL: ttl, Log: hclog.NewNullLogger()})
		done := make(chan struct{})
		running = append(running, done)
		go func() { l.Run(ctx); close(done) }()
		return l
	}
	a, b := mk("a", cli1), mk("b", cli2)

	var leader, other *Leader
	testwait.Until(t, "a leader", func() bool {
		_, aok := a.Fence()
		_, bok := b.Fence()
		switch {
		case aok && !bok:
			leader, other = a, b
		case bok && !aok:
			leader, other = b, a
		}
		return leader != nil
	})
	old, _ := leader.Fence()
	probe := keys.Cell("fence-probe")
	if ok, err := old.Txn(ctx, cli1, nil, clientv3.OpPut(probe, "leader")); err != nil || !ok {
		t.Fatalf("the leader's own fenced write failed: ok=%v err=%v", ok, err)
	}

	// Kill the leader's session.
	resp, err := cli1.Get(ctx, old.Key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read election key: %v", err)
	}
	killedAt := time.Now()
	if _, err := cli1.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	// Revoking stands for the lease running out; the handover itself must
	// then be quick. A second of slack covers a loaded test machine.
	testwait.Poll(t, time.Until(killedAt.Add(ttl+time.Second)), fmt.Sprintf("a new leader within the TTL (%s)", ttl), func() (bool, string) {
		f, ok := other.Fence()
		return ok && f != old, fmt.Sprintf("other leads=%v, fence %+v, the old one %+v", ok, f, old)
	})
	t.Logf("new leader after %s", time.Since(killedAt))

	// The deposed term's write is refused, whoever sends it.
	_, err = old.Txn(ctx, cli1, nil, clientv3.OpPut(probe, "deposed"))
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("deposed leader's fenced write: want ErrNotLeader, got %v", err)
	}
	got, err := cli1.Get(ctx, probe)
	if err != nil || string(got.Kvs[0].Value) != "leader" {
		t.Fatalf("probe = %s, the deposed write landed", got.Kvs[0].Value)
	}
	nf, _ := other.Fence()
	if ok, err := nf.Txn(ctx, cli2, nil, clientv3.OpPut(probe, "new leader")); err != nil || !ok {
		t.Fatalf("the new leader's fenced write failed: ok=%v err=%v", ok, err)
	}
	// The old leader notices and stops claiming to lead.
	testwait.Until(t, "old leader to step down", func() bool {
		f, ok := leader.Fence()
		return !ok || f != old
	})
}

// TestLeaderResignsOnStop: a leader that stops hands over at once, not
// after the TTL.
func TestLeaderResignsOnStop(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	actx, stopA := context.WithCancel(context.Background())
	bctx, stopB := context.WithCancel(context.Background())
	bDone := make(chan struct{})
	defer func() { stopB(); <-bDone }()
	a := New(Config{Client: cli, Keys: keys, Election: testElection, ID: "a", TTL: 60 * time.Second, Log: hclog.NewNullLogger()})
	done := make(chan struct{})
	go func() { a.Run(actx); close(done) }()
	testwait.Until(t, "a to lead", func() bool { _, ok := a.Fence(); return ok })
	b := New(Config{Client: cli, Keys: keys, Election: testElection, ID: "b", TTL: 60 * time.Second, Log: hclog.NewNullLogger()})
	go func() { b.Run(bctx); close(bDone) }()
	stopA()
	<-done
	testwait.Until(t, "b to lead well before the 60 s TTL", func() bool { _, ok := b.Fence(); return ok })
}

// TestLeaderMetrics: the leader gauge follows the term, and every duty
// sweep is counted by outcome.
func TestLeaderMetrics(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	m := metrics.New()
	ctx, stop := context.WithCancel(context.Background())
	fails := func(context.Context, Fence) error { return errors.New("etcd said no") }
	a := New(Config{Client: cli, Keys: keys, Election: testElection, ID: "a", TTL: 60 * time.Second, Log: hclog.NewNullLogger(),
		Metrics: m, Duties: []Duty{
			{Name: "sweep", Interval: 10 * time.Millisecond, Run: func(context.Context, Fence) error { return nil }},
			{Name: "broken", Interval: time.Hour, Run: fails},
		}})
	value := func(name string, labels ...string) float64 {
		t.Helper()
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
		metric:
			for _, mt := range mf.GetMetric() {
				for i, lp := range mt.GetLabel() {
					if i*2+1 >= len(labels) || lp.GetName() != labels[i*2] || lp.GetValue() != labels[i*2+1] {
						continue metric
					}
				}
				if mt.Gauge != nil {
					return mt.GetGauge().GetValue()
				}
				return mt.GetCounter().GetValue()
			}
		}
		t.Fatalf("no %s%v", name, labels)
		return 0
	}
	if v := value("berth_scheduler_duty_runs_total", "duty", "broken", "outcome", "error"); v != 0 {
		t.Fatalf("declared series = %v before any sweep", v)
	}
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	testwait.Poll(t, testwait.Timeout, "two sweeps and the failure counted", func() (bool, string) {
		ok := value("berth_scheduler_duty_runs_total", "duty", "sweep", "outcome", "ok")
		failed := value("berth_scheduler_duty_runs_total", "duty", "broken", "outcome", "error")
		return ok >= 2 && failed == 1, fmt.Sprintf("sweep ok %v, broken error %v", ok, failed)
	})
	if value("berth_scheduler_leader") != 1 || value("berth_scheduler_leader_terms_total") != 1 {
		t.Fatalf("leader gauge %v, terms %v while leading", value("berth_scheduler_leader"), value("berth_scheduler_leader_terms_total"))
	}
	stop()
	<-done
	if value("berth_scheduler_leader") != 0 {
		t.Fatal("leader gauge still 1 after the term ended")
	}
}
