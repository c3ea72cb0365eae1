package bench

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtally"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// A recorder reading the member (timed watches on one stream, the writes
// from the history) reports what one watching everything reports over the
// same boots: every server's stages, the same write table, and fewer
// events delivered to it.
func TestRecorderReadingTheMemberReportsTheSame(t *testing.T) {
	srv, _ := etcdtest.NetClient(t)
	cli := srv.Client()
	k := etcdschema.New("/berth")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start, err := cli.Put(ctx, k.Service("h1"), "{}")
	if err != nil {
		t.Fatal(err)
	}
	tally := etcdtally.New()
	watching, reading := NewRecorder(cli, k), NewRecorder(cli, k)
	reading.ReadMember(srv, tally)
	etcdtally.Wrap(cli, tally, "watching") // the whole-prefix watch's count
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, 2)
	for _, r := range []*Recorder{watching, reading} {
		go func() { errs <- r.Run(rctx, start.Header.Revision+1) }()
	}
	const servers = 5
	var warm, ids []string
	for i := range servers {
		warm = append(warm, fmt.Sprintf("w%d", i))
		ids = append(ids, fmt.Sprintf("u%d", i))
	}
	// The first boots are before the counted phase, of servers of their
	// own, expected as a client expects what it posted: the watches start
	// in the past, and the member may deliver a server's instance records
	// before its build request, which makes a trace of a server not
	// expected.
	for _, r := range []*Recorder{watching, reading} {
		r.Expect(warm, time.Now(), time.Now())
	}
	rev0 := bootForRecorder(ctx, t, cli, k, warm)
	// The watching recorder counts from StartCounting what it receives
	// after: it must have received the first boots' writes by then.
	waitRevision(t, watching, rev0)
	for _, r := range []*Recorder{watching, reading} {
		r.Expect(ids, time.Now(), time.Now())
		r.StartCounting()
	}
	rev1 := bootForRecorder(ctx, t, cli, k, ids)
	for _, r := range []*Recorder{watching, reading} {
		if err := r.WaitFinished(ctx, 2*servers); err != nil { // the first boots' too
			t.Fatal(err)
		}
	}
	// ... and until it has received the phase's last revision.
	waitRevision(t, watching, rev1)
	want, err := watching.writes(rev0, rev1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := reading.writes(rev0, rev1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revisions != want.Revisions || !maps.Equal(got.Puts, want.Puts) || !maps.Equal(got.Deletes, want.Deletes) {
		t.Errorf("writes read from the history %+v, counted from the watch %+v", got, want)
	}
	if want.Revisions != rev1-rev0 {
		t.Errorf("%d revisions counted, want the phase's %d", want.Revisions, rev1-rev0)
	}
	for _, r := range []struct {
		name string
		rec  *Recorder
	}{{"watching", watching}, {"reading the member", reading}} {
		samples, o := r.rec.stageSamples(ids)
		if o.Active != servers || o.Lost != 0 || o.Reschedules != 1 {
			t.Errorf("%s: %+v, want %d active, 1 reschedule", r.name, o, servers)
		}
		for _, stage := range []string{"queue", "schedule", "handoff", "build"} {
			if n := len(samples[stage]); n != servers {
				t.Errorf("%s: %d %s samples, want %d", r.name, n, stage, servers)
			}
		}
	}
	stop()
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	counts := map[string]int64{}
	for _, row := range tally.Rows() {
		if row.Kind == etcdtally.WatchEvents {
			counts[row.Role] = row.Count
		}
	}
	if counts[recorderRole] == 0 || counts[recorderRole] >= counts["watching (no role in ctx)"] {
		t.Errorf("events delivered: %v; want the member's reader to get some, and fewer than the whole-prefix watch", counts)
	}
}

// waitRevision waits until r's watch has delivered revision rev.
func waitRevision(t *testing.T, r *Recorder, rev int64) {
	t.Helper()
	testwait.Until(t, fmt.Sprintf("the recorder has received revision %d", rev), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.lastRev >= rev
	})
}

// bootForRecorder writes what booting each of ids writes, in the order
// and transactions the pipeline writes it (W1 to W5, with the keys the
// recorder does not time beside), and returns the last revision.
func bootForRecorder(ctx context.Context, t *testing.T, cli *clientv3.Client, k etcdschema.Keys, ids []string) int64 {
	t.Helper()
	var rev int64
	txn := func(ops ...clientv3.Op) {
		t.Helper()
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	inst := func(id, status, taskState string) string {
		return etcdschema.MustEncode(&etcdschema.Instance{UUID: id, Status: status, TaskState: taskState, Cell: "cell1"})
	}
	cast := etcdschema.MustEncode(&etcdschema.Build{Op: etcdschema.OpBuild})
	for i, id := range ids {
		txn(clientv3.OpPut(k.BuildRequest(id), "{}"), clientv3.OpPut(k.InstanceMapping(id), "{}"),
			clientv3.OpPut(k.All()+"quotas/p1", "{}"))
		txn(clientv3.OpPut(k.BuildRequestLease(id), "{}"))
		txn(clientv3.OpPut(k.Consumer(id), "{}"), clientv3.OpPut(k.Provider("p1"), "{}"))
		txn(clientv3.OpPut(k.CellInstance("cell1", id), inst(id, etcdschema.StatusBuild, etcdschema.TaskSpawning)),
			clientv3.OpPut(k.InstanceMapping(id), "{}"), clientv3.OpPut(k.Build("h1", id), cast),
			clientv3.OpDelete(k.BuildRequest(id)), clientv3.OpDelete(k.BuildRequestLease(id)))
		if i == 0 {
			// The first build fails and is rescheduled: the agent's
			// outcome (the record back to scheduling, a retry filed, the
			// cast deleted), then the cell conductor's cast to h2.
			txn(clientv3.OpPut(k.CellInstance("cell1", id), inst(id, etcdschema.StatusBuild, etcdschema.TaskScheduling)),
				clientv3.OpPut(k.Retry("cell1", id), "{}"), clientv3.OpDelete(k.Build("h1", id)))
			txn(clientv3.OpPut(k.CellInstance("cell1", id), inst(id, etcdschema.StatusBuild, etcdschema.TaskSpawning)),
				clientv3.OpPut(k.Build("h2", id), cast), clientv3.OpDelete(k.Retry("cell1", id)))
		}
		txn(clientv3.OpPut(k.CellInstance("cell1", id), inst(id, etcdschema.StatusActive, "")),
			clientv3.OpPut(k.HostInstance("h1", id), "{}"), clientv3.OpDelete(k.Build("h1", id)))
	}
	return rev
}
