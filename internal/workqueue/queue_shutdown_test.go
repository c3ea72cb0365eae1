package workqueue

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
)

// TestQueueStopRevokesLeaseEvenAfterSessionEnded: a worker that reaches
// its final transaction after the queue's context ended finds the session
// done (it ends with that context). The queue must still revoke that
// session's lease on its way out, so the item is free at once, not after
// the TTL: dropping the ended session there once left the lease key for
// the whole TTL.
func TestQueueStopRevokesLeaseEvenAfterSessionEnded(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	working := make(chan struct{})
	var q *Queue
	q = testQueue(cli, "stopping", func(ctx context.Context, it Item) error {
		close(working)
		<-ctx.Done()
		q.sessMu.Lock()
		sess := q.session
		q.sessMu.Unlock()
		<-sess.Done()                  // the session's keep-alive has seen the end too
		_, err := q.StillHeld(ctx, it) // as a final transaction would
		return err
	})
	stopped := make(chan struct{})
	go func() { _ = q.Run(ctx); close(stopped) }()
	if err := q.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/q/items/x", "x"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-working:
	case <-time.After(20 * time.Second):
		t.Fatal("item never worked")
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("queue did not stop")
	}
	resp, err := cli.Get(context.Background(), "/q/leases/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Fatalf("%d lease keys left after the queue stopped; its lease was not revoked", resp.Count)
	}
}
