package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/freeport"
	"github.com/berth-project/berth/internal/rawtxn"
)

func freePort(t *testing.T) int {
	t.Helper()
	return freeport.Take(t)
}

// TestCloseWhileReading closes the member while goroutines hammer it with
// serializable reads and transactions through the in-process client, the
// pattern of a test tearing down under a still-running informer. Close must
// wait for them (before the gate, such a read could run against the closed
// backend and crash the process), and every call after it must fail with
// ErrClosed rather than reach the server.
func TestCloseWhileReading(t *testing.T) {
	for round := 0; round < 3; round++ {
		srv, err := Start(Config{
			DataDir:   filepath.Join(t.TempDir(), "etcd"),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		})
		if err != nil {
			t.Fatal(err)
		}
		cli := srv.Client()
		if _, err := cli.Put(context.Background(), "k", "v"); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		var closing atomic.Bool
		started := make(chan struct{}, 8)
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started <- struct{}{}
				for {
					_, err := cli.Get(ctx, "k", clientv3.WithSerializable())
					if err == nil {
						_, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.Version("k"), ">", 0)).
							Then(clientv3.OpGet("k", clientv3.WithSerializable())).Commit()
					}
					if err == nil {
						_, err = rawtxn.Commit(ctx, cli.KV, &pb.TxnRequest{Compare: []*pb.Compare{rawtxn.Present("k")},
							Success: []*pb.RequestOp{rawtxn.Range(&pb.RangeRequest{Key: []byte("k"), Serializable: true})}})
					}
					if errors.Is(err, ErrClosed) || (err != nil && closing.Load()) {
						return
					}
				}
			}()
		}
		for i := 0; i < 8; i++ {
			<-started
		}
		closing.Store(true)
		srv.Close()
		wg.Wait()
		if _, err := cli.Get(ctx, "k"); !errors.Is(err, ErrClosed) {
			t.Fatalf("Get after Close: %v, want ErrClosed", err)
		}
		if _, err := rawtxn.Commit(ctx, cli.KV, &pb.TxnRequest{Success: []*pb.RequestOp{rawtxn.Get("k")}}); !errors.Is(err, ErrClosed) {
			t.Fatalf("a raw transaction after Close: %v, want ErrClosed", err)
		}
	}
}

// TestRaftTiming: heartbeat_interval and election_timeout reach etcd's
// raft (its ticks are heartbeats; an election timeout is counted in them),
// and zero keeps etcd's own 100ms and 1s.
func TestRaftTiming(t *testing.T) {
	for _, tc := range []struct {
		heartbeat, election time.Duration
		tickMs, ticks       int
	}{
		{0, 0, 100, 10},
		{50 * time.Millisecond, 600 * time.Millisecond, 50, 12},
	} {
		srv, err := Start(Config{DataDir: t.TempDir(),
			ClientURL:         fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			PeerURL:           fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
			HeartbeatInterval: tc.heartbeat, ElectionTimeout: tc.election})
		if err != nil {
			t.Fatal(err)
		}
		cfg := srv.etcd.Server.Cfg
		srv.Close()
		if int(cfg.TickMs) != tc.tickMs || cfg.ElectionTicks != tc.ticks {
			t.Errorf("heartbeat %s, election %s: etcd ticks every %d ms, elects after %d ticks; want %d ms, %d",
				tc.heartbeat, tc.election, cfg.TickMs, cfg.ElectionTicks, tc.tickMs, tc.ticks)
		}
	}
}
