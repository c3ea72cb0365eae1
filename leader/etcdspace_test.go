package leader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/status"
	"github.com/berth-project/berth/internal/testwait"
)

// recordingMaintenance is the real maintenance API that also records
// which endpoints were defragmented, in order, whether each was the raft
// leader when its defragmentation began, and how many at most ran at
// once.
type recordingMaintenance struct {
	clientv3.Maintenance
	mu         sync.Mutex
	running    int
	maxRunning int
	order      []string
	leading    []bool
}

func (r *recordingMaintenance) Defragment(ctx context.Context, ep string) (*clientv3.DefragmentResponse, error) {
	r.mu.Lock()
	r.running++
	r.maxRunning = max(r.maxRunning, r.running)
	r.order = append(r.order, ep)
	r.mu.Unlock()
	st, err := r.Maintenance.Status(ctx, ep)
	r.mu.Lock()
	r.leading = append(r.leading, err == nil && st.Leader == st.Header.MemberId)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.running--
		r.mu.Unlock()
	}()
	return r.Maintenance.Defragment(ctx, ep)
}

func (r *recordingMaintenance) defrags() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.order...), r.maxRunning
}

// leadOn wins the scheduler election on cli and returns the term's fence.
func leadOn(t *testing.T, cli *clientv3.Client) Fence {
	t.Helper()
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	e := concurrency.NewElection(sess, etcdschema.New("/t").Election(testElection))
	if err := e.Campaign(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	return Fence{Key: e.Key(), Rev: e.Rev()}
}

// space is the etcd space duties over cli, with a small threshold (the
// tests' backends are a few MiB) and recorded defragmentations.
func space(cli *clientv3.Client, m *metrics.Metrics) (*etcdSpace, *recordingMaintenance) {
	rec := &recordingMaintenance{Maintenance: cli.Maintenance}
	return &etcdSpace{EtcdSpaceConfig: EtcdSpaceConfig{Client: cli, Maintenance: rec, Defrag: true,
		DefragInterval: time.Minute, DefragRatio: 1.5, DefragMinBytes: 1 << 20, AlarmInterval: time.Second,
		Metrics: m, Log: hclog.NewNullLogger()}}, rec
}

// churn writes about n × 16 KiB under prefix, deletes it, and compacts
// physically: the backend file keeps the pages, its live data does not.
func churn(t *testing.T, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	ctx := context.Background()
	val := strings.Repeat("x", 16<<10)
	for i := range n {
		if _, err := cli.Put(ctx, fmt.Sprintf("%s/%04d", prefix, i), val); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := cli.Delete(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
}

// waitFragmented waits until every member reports the pages a churn
// freed: a member reports its in-use size as of its backend's last
// commit (every 100 ms, later on a loaded machine), and the duty must
// find the state the tests mean to start from.
func waitFragmented(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx := context.Background()
	eps := cli.Endpoints()
	testwait.Poll(t, 10*time.Second, "the compacted pages reported free", func() (bool, string) {
		// bbolt frees a page once no older read transaction can see
		// it, which takes a later commit: a small write makes one.
		if _, err := cli.Put(ctx, "/churn-tick", "x"); err != nil {
			return false, err.Error()
		}
		for _, ep := range eps {
			st, err := cli.Status(ctx, ep)
			if err != nil {
				return false, err.Error()
			}
			// The duty's own test (space's DefragMinBytes and
			// DefragRatio), with room for the writes a test makes
			// after this wait: a member that fails it is skipped.
			free := st.DbSize - st.DbSizeInUse
			if free < 3<<19 || float64(st.DbSize) < 1.6*float64(st.DbSizeInUse) {
				return false, fmt.Sprintf("%s: size %d, in use %d", ep, st.DbSize, st.DbSizeInUse)
			}
		}
		return true, ""
	})
}

// dbSizes is each endpoint's backend file size.
func dbSizes(t *testing.T, cli *clientv3.Client, eps []string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, ep := range eps {
		st, err := cli.Status(context.Background(), ep)
		if err != nil {
			t.Fatal(err)
		}
		out[ep] = st.DbSize
	}
	return out
}

// TestEtcdDefragShrinksTheFile: after a churn and a compaction the file
// is mostly free pages; the duty defragments the member and its size
// drops. Run again, with nothing to give back, it leaves it alone.
func TestEtcdDefragShrinksTheFile(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	f := leadOn(t, cli)
	churn(t, cli, "/churn", 200)
	waitFragmented(t, cli)
	before := dbSizes(t, cli, []string{srv.ClientURL()})[srv.ClientURL()]
	m := metrics.New()
	s, rec := space(cli, m)
	if err := s.defragDuty(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	after := dbSizes(t, cli, []string{srv.ClientURL()})[srv.ClientURL()]
	t.Logf("db size %d -> %d", before, after)
	if order, _ := rec.defrags(); len(order) != 1 {
		t.Fatalf("defragmentations = %v, want the one member", order)
	}
	if after >= before-(1<<20) {
		t.Errorf("db size %d -> %d after the defragmentation, want at least 1 MiB less", before, after)
	}
	if err := s.defragDuty(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if order, _ := rec.defrags(); len(order) != 1 {
		t.Errorf("defragmentations = %v after a second sweep; a compact file must be left alone", order)
	}
}

// TestEtcdDefragOneMemberAtATimeRaftLeaderLast: in a 3-member cluster the
// duty defragments every fragmented member, never two at once (two sweeps
// run together, as the periodic duty and the NOSPACE recovery could), and
// the raft leader last.
func TestEtcdDefragOneMemberAtATimeRaftLeaderLast(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	cli := c.Client()
	f := leadOn(t, cli)
	churn(t, cli, "/churn", 200)
	waitFragmented(t, cli)
	eps := c.Endpoints()
	s, rec := space(cli, nil)
	// Each member compacts on its own time after the compaction is
	// committed, and bbolt counts the pages it freed as free only once a
	// later write commits (Berth writes all the time; the test ticks).
	testwait.Poll(t, time.Minute, "every member to show its free pages", func() (bool, string) {
		if _, err := cli.Put(context.Background(), "/tick", time.Now().String()); err != nil {
			return false, err.Error()
		}
		ms, err := s.members(context.Background())
		if err != nil {
			return false, err.Error()
		}
		var state []string
		done := true
		for _, m := range ms {
			state = append(state, fmt.Sprintf("%s: %d of %d in use", m.name, m.status.DbSizeInUse, m.status.DbSize))
			done = done && s.fragmented(m)
		}
		return done, strings.Join(state, ", ")
	})
	before := dbSizes(t, cli, eps)
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() { errs <- s.defragDuty(context.Background(), f) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	order, maxRunning := rec.defrags()
	rec.mu.Lock()
	leading := append([]bool(nil), rec.leading...)
	rec.mu.Unlock()
	t.Logf("defragmented %v (the raft leader then: %v), at most %d at once", order, leading, maxRunning)
	if maxRunning != 1 {
		t.Errorf("%d defragmentations ran at once, want 1", maxRunning)
	}
	if len(order) != 3 {
		t.Fatalf("defragmentations = %v, want each of the 3 members once (the second sweep finds them compact)", order)
	}
	if want := []bool{false, false, true}; !slices.Equal(leading, want) {
		t.Errorf("defragmentation order %v, raft leader when each began %v: want the leader last, and only last", order, leading)
	}
	after := dbSizes(t, cli, eps)
	for _, ep := range eps {
		if after[ep] >= before[ep] {
			t.Errorf("%s: db size %d -> %d, want smaller", ep, before[ep], after[ep])
		}
	}

	// With a member down nothing is defragmented: taking another away
	// for a while could cost the quorum.
	churn(t, cli, "/churn2", 100)
	c.Stop(0)
	if err := s.defragDuty(context.Background(), f); err == nil {
		t.Error("the defrag duty with a member down succeeded, want an error naming the member")
	}
	if order, _ := rec.defrags(); len(order) != 3 {
		t.Errorf("defragmentations = %v with a member down, want none more", order)
	}
}

// TestEtcdDefragStaleFenceDoesNothing: a scheduler whose term ended (its
// election key gone) defragments nothing and is told it no longer leads.
func TestEtcdDefragStaleFenceDoesNothing(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client()
	f := leadOn(t, cli)
	churn(t, cli, "/churn", 200)
	waitFragmented(t, cli)
	if _, err := cli.Delete(context.Background(), f.Key); err != nil { // the term's key expired
		t.Fatal(err)
	}
	s, rec := space(cli, nil)
	if err := s.defragDuty(context.Background(), f); !errors.Is(err, ErrNotLeader) {
		t.Errorf("defrag duty with a stale fence = %v, want ErrNotLeader", err)
	}
	if order, _ := rec.defrags(); len(order) != 0 {
		t.Errorf("a deposed leader defragmented %v", order)
	}
	// The NOSPACE recovery is fenced the same way.
	if err := s.recoverNoSpace(context.Background(), f, nil); !errors.Is(err, ErrNotLeader) {
		t.Errorf("NOSPACE recovery with a stale fence = %v, want ErrNotLeader", err)
	}
	if order, _ := rec.defrags(); len(order) != 0 {
		t.Errorf("a deposed leader defragmented %v", order)
	}
}

// TestEtcdNoSpaceRecovered fills a member with a small quota until etcd
// raises NOSPACE and refuses writes. The readiness check names the alarm
// and the metric shows it; the leader's alarm duty compacts, defragments
// and disarms, after which writes succeed and the check passes again.
func TestEtcdNoSpaceRecovered(t *testing.T) {
	const quota = 8 << 20
	srv := etcdtest.StartWith(t, func(c *embedetcd.Config) { c.QuotaBackendBytes = quota })
	cli := srv.Client()
	ctx := context.Background()
	// Leadership first: under NOSPACE etcd grants no lease, so no
	// election could be won.
	f := leadOn(t, cli)
	// Rewrite a few keys until the history fills the quota: the live data
	// stays small, as a create-and-delete churn's does.
	etcdtest.FillUntilNoSpace(t, cli, quota)

	m := metrics.New()
	st := status.New(m)
	st.EtcdAlarms(cli)
	r := st.Evaluate(ctx)
	if r.Ready || len(r.Checks) != 1 || r.Checks[0].Name != status.EtcdAlarmsCheck || !strings.Contains(r.Checks[0].Error, "NOSPACE") {
		t.Errorf("readiness under NOSPACE = %+v, want the %q check failing and naming NOSPACE", r, status.EtcdAlarmsCheck)
	}
	if got := alarmGauge(t, m, "NOSPACE"); got != 1 {
		t.Errorf("berth_etcd_alarm{type=NOSPACE} = %v under NOSPACE, want 1", got)
	}

	s, rec := space(cli, m)
	testwait.Poll(t, time.Minute, "the alarm duty to recover from NOSPACE", func() (bool, string) {
		if err := s.alarmDuty(ctx, f); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if order, _ := rec.defrags(); len(order) != 1 {
		t.Errorf("defragmentations during the recovery = %v, want the one member", order)
	}
	if _, err := cli.Put(ctx, "/after", "written"); err != nil {
		t.Fatalf("a write after the recovery: %v", err)
	}
	if r := st.Evaluate(ctx); !r.Ready {
		t.Errorf("readiness after the recovery = %+v, want ready", r)
	}
	if got := alarmGauge(t, m, "NOSPACE"); got != 0 {
		t.Errorf("berth_etcd_alarm{type=NOSPACE} = %v after the recovery, want 0", got)
	}
}

// alarmGauge reads berth_etcd_alarm{type}.
func alarmGauge(t *testing.T, m *metrics.Metrics, typ string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "berth_etcd_alarm" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "type" && l.GetValue() == typ {
					return mt.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no berth_etcd_alarm{type=%q}", typ)
	return 0
}

// TestLeaderRecoversNoSpaceUnattended: a running leader with the etcd space
// duties (as the stack wires them) sees the NOSPACE alarm on its own and
// recovers; writes succeed again with nobody calling the duty.
func TestLeaderRecoversNoSpaceUnattended(t *testing.T) {
	const quota = 8 << 20
	srv := etcdtest.StartWith(t, func(c *embedetcd.Config) { c.QuotaBackendBytes = quota })
	cli := srv.Client()
	ctx, cancel := context.WithCancel(context.Background())
	m := metrics.New()
	l := New(Config{Client: cli, Keys: etcdschema.New("/t"), Election: testElection, ID: "a", TTL: 10 * time.Second,
		Log: hclog.NewNullLogger(), Metrics: m,
		Duties: EtcdSpaceDuties(EtcdSpaceConfig{Client: cli, Defrag: true, DefragInterval: time.Hour,
			DefragRatio: 2, DefragMinBytes: 256 << 20, AlarmInterval: 100 * time.Millisecond,
			Metrics: m, Log: hclog.NewNullLogger()})})
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	testwait.Until(t, "a leader", func() bool { _, ok := l.Fence(); return ok })

	etcdtest.FillUntilNoSpace(t, cli, quota)
	testwait.Poll(t, time.Minute, "writes to be accepted again", func() (bool, string) {
		_, err := cli.Put(ctx, "/after", "written")
		return err == nil, fmt.Sprint(err)
	})
	if _, ok := l.Fence(); !ok {
		t.Error("the leader lost its term during the NOSPACE alarm")
	}
}

// TestNextToDefrag: followers first in the members' order, the raft leader
// last, only members still to do and still worth it.
func TestNextToDefrag(t *testing.T) {
	mk := func(id, leader uint64) member {
		return member{id: id, status: &clientv3.StatusResponse{Leader: leader, Header: &pb.ResponseHeader{MemberId: id}}}
	}
	ms := []member{mk(1, 1), mk(2, 1), mk(3, 1)} // 1 leads
	all := func(member) bool { return true }
	cases := []struct {
		desc   string
		ms     []member
		todo   []uint64
		want   func(member) bool
		wantID uint64
		wantOK bool
	}{
		{"a follower before the leader", ms, []uint64{1, 2, 3}, all, 2, true},
		{"the leader once no follower is left", ms, []uint64{1}, all, 1, true},
		{"a follower no longer fragmented is skipped", ms, []uint64{1, 2, 3}, func(m member) bool { return m.id != 2 }, 3, true},
		{"leadership moved to a member already done", []member{mk(1, 2), mk(2, 2), mk(3, 2)}, []uint64{1, 3}, all, 1, true},
		{"nothing left worth it", ms, []uint64{2}, func(member) bool { return false }, 0, false},
		{"nothing to do", ms, nil, all, 0, false},
	}
	for _, c := range cases {
		got, ok := nextToDefrag(c.ms, c.todo, c.want)
		if got.id != c.wantID || ok != c.wantOK {
			t.Errorf("%s: next = %d, %v; want %d, %v", c.desc, got.id, ok, c.wantID, c.wantOK)
		}
	}
}
