package members

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// TestRegistrationLifecycle: a member is listed while it runs, registers
// again when its lease is lost, and is gone at once when it stops.
func TestRegistrationLifecycle(t *testing.T) {
	testLifecycle(t, 3*time.Second) // keep-alives every second notice the loss
}

func testLifecycle(t *testing.T, ttl time.Duration) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	log := hclog.NewNullLogger()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := NewWatcher(cli, keys, "scheduler", log)
	go w.Run(ctx)

	rctx, stop := context.WithCancel(ctx)
	reg := &Registration{Cli: cli, Keys: keys, Role: "scheduler", ID: "s1", URL: "http://127.0.0.1:9", TTL: ttl, Log: log}
	done := make(chan struct{})
	go func() { reg.Run(rctx); close(done) }()
	<-reg.Registered()
	testwait.Until(t, "s1 listed", func() bool {
		l := w.List()
		return len(l) == 1 && l[0].ID == "s1" && l[0].URL == "http://127.0.0.1:9"
	})

	// Lose the lease (as when etcd was unreachable past the TTL).
	resp, err := cli.Get(ctx, keys.Member("scheduler", "s1"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("read registration: %v", err)
	}
	lost := clientv3.LeaseID(resp.Kvs[0].Lease)
	if _, err := cli.Revoke(ctx, lost); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "s1 registered again under a new lease", func() bool {
		r, err := cli.Get(ctx, keys.Member("scheduler", "s1"))
		return err == nil && len(r.Kvs) == 1 && clientv3.LeaseID(r.Kvs[0].Lease) != lost
	})

	stop()
	<-done
	testwait.Poll(t, ttl/2, "s1 gone before its TTL", func() (bool, string) { return w.Count() == 0, fmt.Sprint(w.Count(), " listed") })
}

func TestWatcherSkipsUnreadableRegistrations(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := cli.Put(ctx, keys.Member("scheduler", "future"), `{"version": 99, "url": "http://x"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, keys.Member("scheduler", "ok"), etcdschema.MustEncode(&etcdschema.Member{URL: "http://y"})); err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(cli, keys, "scheduler", hclog.NewNullLogger())
	go w.Run(ctx)
	if err := w.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if l := w.List(); len(l) != 1 || l[0].ID != "ok" {
		t.Fatalf("want only the readable member, got %v", l)
	}
}

func TestRegistrationRefusesAnIDThatIsNotOneKeySegment(t *testing.T) {
	reg := &Registration{Cli: etcdtest.Client(t), Keys: etcdschema.New("/t"), Role: "scheduler", ID: "a/b",
		TTL: time.Second, Log: hclog.NewNullLogger()}
	if err := reg.Run(context.Background()); err == nil {
		t.Fatal("an id with a slash was accepted; watchers would never list it")
	}
}
