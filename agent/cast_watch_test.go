package agent

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// deleteCounter is a client's real Watcher that counts the delete events
// it delivers under prefix.
type deleteCounter struct {
	clientv3.Watcher
	prefix  string
	deletes atomic.Int64
}

func (w *deleteCounter) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := w.Watcher.Watch(ctx, key, opts...)
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for resp := range in {
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete && strings.HasPrefix(string(ev.Kv.Key), w.prefix) {
					w.deletes.Add(1)
				}
			}
			select {
			case out <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// TestAgentCastWatchDeliversNoDeletes: every build's outcome deletes its
// cast, and the agent's cast watch is not handed those deletes (etcd
// leaves them out: informer.PutsOnly), while the builds still run. A
// second build after the first's delete proves the watch went past it.
func TestAgentCastWatchDeliversNoDeletes(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	counter := &deleteCounter{Watcher: cli.Watcher, prefix: keys.Builds("h1")}
	cli.Watcher = counter
	cli, keys, p, a := startAgentOn(t, cli, FakeConfig{})
	for _, id := range []string{"i1", "i2"} {
		cast(t, cli, keys, p, a, id)
		testwait.Until(t, "instance "+id+" ACTIVE", func() bool { return instance(t, cli, keys, id).Status == etcdschema.StatusActive })
		testwait.Until(t, "the cast of "+id+" deleted", func() bool {
			resp, err := cli.Get(context.Background(), keys.Build("h1", id))
			return err == nil && len(resp.Kvs) == 0
		})
	}
	if n := counter.deletes.Load(); n != 0 {
		t.Errorf("the agent's cast watch was handed %d deletes, want none", n)
	}
}
