package informer

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/internal/etcdtest"
)

// recorder keeps the values the informer handed over.
type recorder struct {
	mu   sync.Mutex
	vals map[string]string
}

func (r *recorder) Reset(evs []Event, _ int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vals = map[string]string{}
	for _, e := range evs {
		r.vals[e.Key] = string(e.Value)
	}
}

func (r *recorder) Apply(evs []Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range evs {
		if e.Deleted {
			delete(r.vals, e.Key)
		} else {
			r.vals[e.Key] = string(e.Value)
		}
	}
}

func (r *recorder) get(k string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.vals[k]
}

// TestWaitForRevision checks read-your-writes: once WaitForRevision(rev)
// returns, every write under the prefix up to rev has been applied, and a
// revision written outside the prefix (no event ever comes) is reached too,
// through a progress notification.
func TestWaitForRevision(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := &recorder{}
	in := New(cli, "/p/", rec, hclog.NewNullLogger())
	go in.Run(ctx)
	if err := in.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		v := string(rune('a' + i))
		resp, err := cli.Put(ctx, "/p/k", v)
		if err != nil {
			t.Fatal(err)
		}
		if err := in.WaitForRevision(ctx, resp.Header.Revision); err != nil {
			t.Fatal(err)
		}
		if got := rec.get("/p/k"); got != v {
			t.Fatalf("after waiting for revision %d the handler has %q, want %q", resp.Header.Revision, got, v)
		}
	}
	resp, err := cli.Put(ctx, "/elsewhere", "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := in.WaitForRevision(ctx, resp.Header.Revision); err != nil {
		t.Fatalf("a revision outside the prefix was never reached: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if err := in.WaitForRevision(short, resp.Header.Revision+1000); err == nil {
		t.Fatal("waiting for a revision etcd has not reached returned without error")
	}
}
