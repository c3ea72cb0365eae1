package api

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/logtest"
)

func storeOps(keys etcdschema.Keys, uuid string) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpPut(keys.InstanceMapping(uuid), "m"),
		clientv3.OpPut(keys.BuildRequest(uuid), "b"),
	}
}

// A cluster that loses its quorum while build requests are stored: the
// store is retried until a member comes back, and lands once.
func TestStoreOnceRidesOutLostQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out etcd's proposal timeout")
	}
	c := etcdtest.StartCluster(t, 3)
	cli := c.Client()
	keys := etcdschema.New("/t")
	logs := &logtest.Buffer{}
	s := New(cli, keys, noAllocations{}, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn}))

	// One member left: no quorum, nothing commits.
	c.Stop(1)
	c.Stop(2)
	type result struct {
		stored bool
		err    error
	}
	done := make(chan result, 1)
	go func() {
		stored, err := s.storeOnce(context.Background(), "req-1", keys.InstanceMapping("u1"), nil, storeOps(keys, "u1"))
		done <- result{stored, err}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(logs.String(), "etcd cannot commit for now, retrying") {
		select {
		case r := <-done:
			t.Fatalf("stored without a quorum: %+v", r)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no retry logged within 60s; logs:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Restart(1) // the quorum is back
	r := <-done
	if r.err != nil || !r.stored {
		t.Fatalf("storeOnce after the quorum came back: stored %v, err %v; logs:\n%s", r.stored, r.err, logs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, keys.InstanceMapping("u1"))
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Version != 1 {
		t.Fatalf("instance mapping after the retries: %+v %v; want one key written once", resp, err)
	}
}

// An attempt that landed but whose answer was lost makes the retry fail
// on the guard: that reads as stored, and nothing is written again.
func TestStoreRetryTakesALandedAttemptAsStored(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	s := New(cli, keys, noAllocations{}, hclog.NewNullLogger())
	ctx := context.Background()
	for _, retry := range []bool{false, true, true} {
		stored, err := s.storeAttempt(ctx, retry, keys.InstanceMapping("u1"), nil, storeOps(keys, "u1"))
		if err != nil || !stored {
			t.Fatalf("attempt (retry %v): stored %v, err %v", retry, stored, err)
		}
	}
	resp, err := cli.Get(ctx, keys.BuildRequest("u1"))
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Version != 1 {
		t.Fatalf("build request: %+v %v; want it written once", resp.Kvs, err)
	}

	// A retry whose earlier attempt did not land writes.
	if stored, err := s.storeAttempt(ctx, true, keys.InstanceMapping("u3"), nil, storeOps(keys, "u3")); err != nil || !stored {
		t.Fatalf("first landing on a retry: stored %v, err %v", stored, err)
	}
	if resp, err := cli.Get(ctx, keys.BuildRequest("u3")); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("build request of a retry's landing: %+v %v", resp.Kvs, err)
	}

	// A failed compare of the caller's own (the server group gone) is not
	// stored, and writes nothing, on a first attempt or a retry.
	gone := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(keys.ServerGroup("g")), ">", 0)}
	for _, retry := range []bool{false, true} {
		stored, err := s.storeAttempt(ctx, retry, keys.InstanceMapping("u2"), gone, storeOps(keys, "u2"))
		if err != nil || stored {
			t.Fatalf("with the group gone (retry %v): stored %v, err %v; want not stored", retry, stored, err)
		}
	}
	if resp, err := cli.Get(ctx, keys.InstanceMapping("u2")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("instance mapping with the group gone: %+v %v", resp.Kvs, err)
	}
}
