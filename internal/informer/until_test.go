package informer

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
)

// keyLog records the keys a handler is listed and handed.
type keyLog struct {
	mu             sync.Mutex
	listed, events []string
}

func (l *keyLog) Reset(evs []Event, _ int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listed = nil
	for _, e := range evs {
		l.listed = append(l.listed, e.Key+"="+string(e.Value))
	}
}

func (l *keyLog) Apply(evs []Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range evs {
		if e.Deleted {
			l.events = append(l.events, "-"+e.Key)
			continue
		}
		l.events = append(l.events, e.Key+"="+string(e.Value))
	}
}

// TestUntilFollowsARange: an informer with Until lists and watches the
// keys from its prefix up to the end, both included sub-prefixes and
// single keys, and nothing before or after them.
func TestUntilFollowsARange(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, k := range []string{"/h/a", "/h/i/1", "/h/s", "/h/t"} {
		if _, err := cli.Put(ctx, k, "0"); err != nil {
			t.Fatal(err)
		}
	}
	l := &keyLog{}
	in := New(cli, "/h/i/", l, hclog.NewNullLogger(), Until("/h/s\x00"))
	go in.Run(ctx)
	if err := in.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	var rev int64
	for _, op := range []clientv3.Op{clientv3.OpPut("/h/a", "1"), clientv3.OpPut("/h/i/2", "1"),
		clientv3.OpPut("/h/s", "1"), clientv3.OpPut("/h/t", "1"), clientv3.OpDelete("/h/i/1"), clientv3.OpPut("/h/s0", "1")} {
		resp, err := cli.Do(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Put() != nil {
			rev = resp.Put().Header.Revision
		} else {
			rev = resp.Del().Header.Revision
		}
	}
	if err := in.WaitForRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if want := []string{"/h/i/1=0", "/h/s=0"}; !slices.Equal(l.listed, want) {
		t.Errorf("listed %v, want %v", l.listed, want)
	}
	if want := []string{"/h/i/2=1", "/h/s=1", "-/h/i/1"}; !slices.Equal(l.events, want) {
		t.Errorf("handed %v, want %v", l.events, want)
	}
}

// TestKeyFollowsOneKey: an informer with Key lists and watches its one
// key, its puts and its delete, and not the keys it is a prefix of.
func TestKeyFollowsOneKey(t *testing.T) {
	cli := etcdtest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, k := range []string{"/m/h1", "/m/h10", "/m/h1/x"} {
		if _, err := cli.Put(ctx, k, "0"); err != nil {
			t.Fatal(err)
		}
	}
	l := &keyLog{}
	in := New(cli, "/m/h1", l, hclog.NewNullLogger(), Key())
	go in.Run(ctx)
	if err := in.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	var rev int64
	for _, op := range []clientv3.Op{clientv3.OpPut("/m/h10", "1"), clientv3.OpPut("/m/h1", "1"),
		clientv3.OpPut("/m/h1/x", "1"), clientv3.OpPut("/m/h1\x00", "1"), clientv3.OpDelete("/m/h1"), clientv3.OpPut("/m/h0", "1")} {
		resp, err := cli.Do(ctx, op)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Put() != nil {
			rev = resp.Put().Header.Revision
		} else {
			rev = resp.Del().Header.Revision
		}
	}
	if err := in.WaitForRevision(ctx, rev); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if want := []string{"/m/h1=0"}; !slices.Equal(l.listed, want) {
		t.Errorf("listed %v, want %v", l.listed, want)
	}
	if want := []string{"/m/h1=1", "-/m/h1"}; !slices.Equal(l.events, want) {
		t.Errorf("handed %v, want %v", l.events, want)
	}
}
