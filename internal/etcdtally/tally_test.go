package etcdtally

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/internal/rolelabel"
)

// counts is a tally's rows as role -> kind -> count.
func counts(t *Tally) map[string]map[string]int64 {
	m := map[string]map[string]int64{}
	for _, r := range t.Rows() {
		if m[r.Role] == nil {
			m[r.Role] = map[string]int64{}
		}
		m[r.Role][r.Kind] = r.Count
	}
	return m
}

// TestWrapCountsWhatTheServerRanByRole runs requests on a real member
// through a wrapped in-process client and checks each is counted under
// its context's role, with what ran inside transactions: the branch that
// ran, nested transactions' too.
func TestWrapCountsWhatTheServerRanByRole(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.NewClient()
	defer cli.Close()
	tally := New()
	Wrap(cli, tally, "test client")
	if _, ok := cli.KV.(rawtxn.Sender); !ok {
		t.Fatal("the wrapped KV sends no transaction as built: every one would take clientv3's path")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	tests := []struct {
		desc string
		role string // "" runs without a role label
		do   func(ctx context.Context) error
		want map[string]int64
	}{
		{desc: "a put", role: "writer",
			do:   func(ctx context.Context) error { _, err := cli.Put(ctx, "/t/a", "1"); return err },
			want: map[string]int64{Put: 1}},
		{desc: "a prefix range returns its keys", role: "reader",
			do: func(ctx context.Context) error {
				if _, err := cli.Put(ctx, "/t/b", "2"); err != nil {
					return err
				}
				_, err := cli.Get(ctx, "/t/", clientv3.WithPrefix())
				return err
			},
			want: map[string]int64{Put: 1, Range: 1, RangeKeys: 2}},
		{desc: "a txn whose compare holds runs its Then", role: "claimer",
			do: func(ctx context.Context) error {
				_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version("/t/a"), ">", 0)).
					Then(clientv3.OpPut("/t/c", "3"), clientv3.OpGet("/t/a"), clientv3.OpDelete("/t/b")).
					Else(clientv3.OpPut("/t/never", "x")).Commit()
				return err
			},
			want: map[string]int64{Txn: 1, TxnCompare: 1, TxnPut: 1, TxnRange: 1, RangeKeys: 1, TxnDelete: 1}},
		{desc: "a failed txn runs its Else, a nested txn counted inside", role: "claimer2",
			do: func(ctx context.Context) error {
				nested := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.Version("/t/none"), "=", 0)},
					[]clientv3.Op{clientv3.OpPut("/t/d", "4")}, nil)
				_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version("/t/none"), ">", 0)).
					Then(clientv3.OpPut("/t/never", "x")).Else(nested).Commit()
				return err
			},
			want: map[string]int64{Txn: 1, TxnFailed: 1, TxnCompare: 2, TxnPut: 1}},
		{desc: "a txn sent as built counts as its clientv3 twin", role: "raw claimer",
			do: func(ctx context.Context) error {
				_, err := rawtxn.Commit(ctx, cli.KV, &pb.TxnRequest{
					Compare: []*pb.Compare{rawtxn.Present("/t/a")},
					Success: []*pb.RequestOp{rawtxn.Put("/t/c", "3"), rawtxn.Get("/t/a"), rawtxn.Delete("/t/b")},
					Failure: []*pb.RequestOp{rawtxn.Put("/t/never", "x")}})
				return err
			},
			want: map[string]int64{Txn: 1, TxnCompare: 1, TxnPut: 1, TxnRange: 1, RangeKeys: 1, TxnDelete: 1}},
		{desc: "a failed txn sent as built runs its Else, a nested txn counted inside", role: "raw claimer2",
			do: func(ctx context.Context) error {
				nested := rawtxn.Nested(&pb.TxnRequest{Compare: []*pb.Compare{rawtxn.Absent("/t/none")},
					Success: []*pb.RequestOp{rawtxn.Put("/t/d", "4")}})
				_, err := rawtxn.Commit(ctx, cli.KV, &pb.TxnRequest{
					Compare: []*pb.Compare{rawtxn.Present("/t/none")},
					Success: []*pb.RequestOp{rawtxn.Put("/t/never", "x")}, Failure: []*pb.RequestOp{nested}})
				return err
			},
			want: map[string]int64{Txn: 1, TxnFailed: 1, TxnCompare: 2, TxnPut: 1}},
		{desc: "a context without a role counts under the client's name",
			do:   func(ctx context.Context) error { _, err := cli.Delete(ctx, "/t/d"); return err },
			want: map[string]int64{Delete: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var err error
			role := tc.role
			if role == "" {
				role = "test client (no role in ctx)"
				err = tc.do(ctx)
			} else {
				rolelabel.Do(ctx, tc.role, func(ctx context.Context) { err = tc.do(ctx) })
			}
			if err != nil {
				t.Fatal(err)
			}
			got := counts(tally)[role]
			if len(got) != len(tc.want) {
				t.Errorf("role %q counted %v, want %v", role, got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("role %q %s = %d, want %d (all: %v)", role, k, got[k], v, got)
				}
			}
		})
	}
}

// TestWatchCountsDeliveredEvents opens a wrapped watch, writes, and
// checks the events delivered are counted and forwarded unchanged; the
// forwarding goroutine ends with the watch (leakcheck).
func TestWatchCountsDeliveredEvents(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.NewClient()
	defer cli.Close()
	tally := New()
	Wrap(cli, tally, "test client")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wch clientv3.WatchChan
	wctx, stop := context.WithCancel(ctx)
	rolelabel.Do(wctx, "watcher", func(ctx context.Context) { wch = cli.Watch(ctx, "/w/", clientv3.WithPrefix()) })
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut("/w/a", "1"), clientv3.OpPut("/w/b", "2")).Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/w/c", "3"); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for len(keys) < 3 {
		select {
		case resp := <-wch:
			for _, ev := range resp.Events {
				keys = append(keys, string(ev.Kv.Key))
			}
		case <-ctx.Done():
			t.Fatalf("watch delivered %v before the deadline", keys)
		}
	}
	if want := []string{"/w/a", "/w/b", "/w/c"}; len(keys) != 3 || keys[0] != want[0] || keys[2] != want[2] {
		t.Errorf("watch delivered %v, want %v", keys, want)
	}
	stop()
	for range wch { // closed once the watch ends
	}
	got := counts(tally)["watcher"]
	if got[WatchOpen] != 1 || got[WatchEvents] != 3 || got[WatchResp] < 2 {
		t.Errorf("watcher counted %v, want 1 watch, 3 events in 2 or more responses", got)
	}
	tally.Reset()
	if got := counts(tally)["watcher"]; got[WatchEvents] != 0 {
		t.Errorf("after Reset: %v, want zeros", got)
	}
}
