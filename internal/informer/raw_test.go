package informer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
)

// rawRecorder is a RawHandler that keeps the values it was handed, the
// loads it made, and what ApplyRaw saw.
type rawRecorder struct {
	cli    *clientv3.Client
	prefix string

	mu      sync.Mutex
	vals    map[string]string
	loads   int
	applied int64 // the rev of the last ApplyRaw
	lastEv  int64 // the mod revision of the last event applied
	// replayed counts events at or below a revision already applied: a
	// resumed watch must start after what was applied.
	replayed int
	// progress counts event-less ApplyRaw calls.
	progress int
}

func (r *rawRecorder) Load(ctx context.Context) (int64, error) {
	vals := map[string]string{}
	rev, err := ListRaw(ctx, r.cli, r.prefix, 0, func(kvs []*mvccpb.KeyValue) error {
		for _, kv := range kvs {
			vals[string(kv.Key)] = string(kv.Value)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vals, r.loads, r.applied, r.lastEv = vals, r.loads+1, rev, rev
	return rev, nil
}

func (r *rawRecorder) ApplyRaw(evs []*clientv3.Event, rev int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(evs) == 0 {
		r.progress++
	}
	for _, e := range evs {
		if e.Kv.ModRevision <= r.lastEv {
			r.replayed++
		}
		r.lastEv = e.Kv.ModRevision
		if e.Type == mvccpb.DELETE {
			delete(r.vals, string(e.Kv.Key))
		} else {
			r.vals[string(e.Kv.Key)] = string(e.Kv.Value)
		}
	}
	r.applied = max(r.applied, rev)
}

func (r *rawRecorder) state() (vals map[string]string, loads, replayed, progress int, applied int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	vals = map[string]string{}
	for k, v := range r.vals {
		vals[k] = v
	}
	return vals, r.loads, r.replayed, r.progress, r.applied
}

// breakingWatcher is a client's Watcher whose watches the test can break
// as a broken connection or a lost leader does: the watch's channel
// answers one cancelled response (an error other than a compaction) and
// closes.
type breakingWatcher struct {
	clientv3.Watcher
	watches atomic.Int32
	breaks  chan struct{}
}

func (w *breakingWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	w.watches.Add(1)
	real := w.Watcher.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for {
			select {
			case resp, ok := <-real:
				if !ok {
					return
				}
				select {
				case out <- resp:
				case <-ctx.Done():
					return
				}
			case <-w.breaks:
				select {
				case out <- clientv3.WatchResponse{Canceled: true}:
				case <-ctx.Done():
				}
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// A raw informer hands its handler etcd's events (key and value bytes,
// mod revisions, deletes) and, for a revision written outside its prefix,
// the progress notification's revision; when its watch breaks it lists
// again, or with Resume watches again from the revision reached, missing
// nothing and replaying nothing.
func TestRawInformerFollowsAndResumes(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		opts      []Option
		wantLoads int // after one broken watch
	}{
		{desc: "a broken watch lists again", wantLoads: 2},
		{desc: "with Resume a broken watch watches again", opts: []Option{Resume()}, wantLoads: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			srv, _ := etcdtest.NetClient(t)
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL()}})
			if err != nil {
				t.Fatal(err)
			}
			w := &breakingWatcher{Watcher: cli.Watcher, breaks: make(chan struct{})}
			cli.Watcher = w
			defer cli.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := cli.Put(ctx, "/r/listed", "0"); err != nil {
				t.Fatal(err)
			}
			rec := &rawRecorder{cli: cli, prefix: "/r/"}
			in := NewRaw(cli, "/r/", rec, hclog.NewNullLogger(), tc.opts...)
			go in.Run(ctx)
			if err := in.WaitSynced(ctx); err != nil {
				t.Fatal(err)
			}
			put := func(k, v string) int64 {
				t.Helper()
				resp, err := cli.Put(ctx, k, v)
				if err != nil {
					t.Fatal(err)
				}
				return resp.Header.Revision
			}
			put("/r/a", "1")
			del, err := cli.Delete(ctx, "/r/listed")
			if err != nil {
				t.Fatal(err)
			}
			if err := in.WaitForRevision(ctx, del.Header.Revision); err != nil {
				t.Fatal(err)
			}
			if vals, loads, _, _, applied := rec.state(); len(vals) != 1 || vals["/r/a"] != "1" || loads != 1 || applied != del.Header.Revision {
				t.Fatalf("after a put and a delete: %v, %d loads, applied to %d (want %d)", vals, loads, applied, del.Header.Revision)
			}

			// Break the watch, write while it is down, and wait for the
			// writes.
			w.breaks <- struct{}{}
			put("/r/a", "2")
			last := put("/r/b", "3")
			if err := in.WaitForRevision(ctx, last); err != nil {
				t.Fatal(err)
			}
			vals, loads, replayed, _, _ := rec.state()
			if len(vals) != 2 || vals["/r/a"] != "2" || vals["/r/b"] != "3" {
				t.Errorf("after the broken watch the handler has %v", vals)
			}
			if loads != tc.wantLoads || replayed != 0 {
				t.Errorf("%d loads (want %d), %d events replayed", loads, tc.wantLoads, replayed)
			}
			if n := w.watches.Load(); n < 2 {
				t.Errorf("%d watches: the broken one was not replaced", n)
			}

			// A revision outside the prefix brings no event: the handler
			// is told of it by the progress notification that answers
			// WaitForRevision.
			outside := put("/elsewhere", "x")
			if err := in.WaitForRevision(ctx, outside); err != nil {
				t.Fatal(err)
			}
			if _, loads, _, progress, applied := rec.state(); progress == 0 || applied < outside || loads != tc.wantLoads {
				t.Errorf("revision %d outside the prefix: %d progress notifications applied, handler at %d, %d loads",
					outside, progress, applied, loads)
			}
		})
	}
}

// RunFrom starts from a handler's own load; a watch from a compacted
// revision lists again (with Resume too) and misses nothing.
func TestRawInformerRunFromCompactedRevision(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := &rawRecorder{cli: cli, prefix: "/r/"}
	old, err := rec.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := 0; i < 3; i++ {
		resp, err := cli.Put(ctx, fmt.Sprintf("/r/k%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	if _, err := cli.Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	in := NewRaw(cli, "/r/", rec, hclog.NewNullLogger(), Resume())
	go in.RunFrom(ctx, old)
	if err := in.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if err := in.WaitForRevision(ctx, last); err != nil {
		t.Fatal(err)
	}
	if vals, loads, _, _, _ := rec.state(); len(vals) != 3 || loads != 2 {
		t.Fatalf("after a watch from a compacted revision: %v, %d loads (want 3 keys, 2 loads)", vals, loads)
	}
}

// ListRaw hands over etcd's key-values, create revisions and leases
// included, at the revision asked for.
func TestListRawKeepsWhatEtcdSent(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	first, err := cli.Put(ctx, "/l/a", "1", clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/l/a", "2", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	var got []*mvccpb.KeyValue
	rev, err := ListRaw(ctx, cli, "/l/", first.Header.Revision, func(kvs []*mvccpb.KeyValue) error {
		got = append(got, kvs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rev != first.Header.Revision || len(got) != 1 || string(got[0].Value) != "1" ||
		got[0].CreateRevision != first.Header.Revision || got[0].Lease != int64(lease.ID) {
		t.Fatalf("ListRaw at %d: revision %d, %v", first.Header.Revision, rev, got)
	}
	stop := errors.New("stop")
	if _, err := ListRaw(ctx, cli, "/l/", 0, func([]*mvccpb.KeyValue) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("ListRaw with a failing fn: %v", err)
	}
}
