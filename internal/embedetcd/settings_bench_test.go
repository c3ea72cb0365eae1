package embedetcd

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/features"

	"github.com/berth-project/berth/internal/etcdgrpc"
	"github.com/berth-project/berth/internal/freeport"
)

// BenchmarkMemberSettings is the member's CPU per Berth-like request
// pair — a transaction of two compares, two puts and a delete (a claim's
// or a hand-off's shape) and a linearizable read of one key — with
// Berth's settings and with each of etcd's settings that could be
// configuration rather than work changed alone, so that one run says
// what each costs. The figure is the whole process's CPU (getrusage)
// per pair, cpu-us/op: on a shared machine wall time says nothing.
// 32 goroutines, over 20,000 keys already written (a 10,000-host
// cloud's index holds far more; the btree's depth grows by one per
// ~30x).
//
//	go test -run XXX -bench MemberSettings -benchtime 20000x -count 2 ./internal/embedetcd
func BenchmarkMemberSettings(b *testing.B) {
	variants := []struct {
		name string
		tune func(*embed.Config)
		grpc bool // a networked client instead of the in-process one
	}{
		{name: "berth"},
		{name: "grpc-client", grpc: true},
		{name: "grpc-client-goroutine-per-stream", grpc: true, tune: func(c *embed.Config) { c.GRPCAdditionalServerOptions = etcdgrpc.ServerOptions() }},
		{name: "metrics-extensive", tune: func(c *embed.Config) { c.Metrics = "extensive" }},
		{name: "snapshot-count-100k", tune: func(c *embed.Config) { c.SnapshotCount = 100_000 }},
		{name: "backend-batch-1s", tune: func(c *embed.Config) {
			c.BackendBatchInterval, c.BackendBatchLimit = time.Second, 100_000
		}},
		{name: "no-shared-txn-buffer", tune: func(c *embed.Config) {
			if err := c.ServerFeatureGate.(interface{ Set(string) error }).Set(string(features.TxnModeWriteWithSharedBuffer) + "=false"); err != nil {
				b.Fatal(err)
			}
		}},
		{name: "log-debug", tune: func(c *embed.Config) { c.LogLevel = "debug" }},
		// For scale only: Berth keeps fsync on (docs/operations.md).
		{name: "unsafe-no-fsync", tune: func(c *embed.Config) { c.UnsafeNoFsync = true }},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) { benchMember(b, v.tune, v.grpc) })
	}
}

func benchMember(b *testing.B, tune func(*embed.Config), grpc bool) {
	port := func() int { return freeport.Take(b) }
	srv, err := Start(Config{
		DataDir:   filepath.Join(b.TempDir(), "etcd"),
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", port()),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", port()),
		tune:      tune,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	cli := srv.Client()
	if grpc {
		if cli, err = clientv3.New(clientv3.Config{Endpoints: []string{srv.ClientURL()}, DialTimeout: 5 * time.Second,
			DialOptions: etcdgrpc.DialOptions()}); err != nil {
			b.Fatal(err)
		}
		defer cli.Close()
	}
	ctx := context.Background()
	const keys = 20_000
	for i := 0; i < keys; i += 100 {
		ops := make([]clientv3.Op, 0, 100)
		for j := i; j < i+100; j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/berth/hosts/h%06d/service", j), `{"v":1,"host":"h"}`))
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
	}
	value := string(make([]byte, 600)) // a cast's size
	var seq atomic.Int64
	b.SetParallelism(16)
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := seq.Add(1)
			host := fmt.Sprintf("/berth/hosts/h%06d/service", i%keys)
			k := fmt.Sprintf("/berth/bench/%d", i)
			if _, err := cli.Get(ctx, host); err != nil {
				b.Error(err)
				return
			}
			_, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.Version(host), ">", 0),
				clientv3.Compare(clientv3.Version(k), "=", 0)).
				Then(clientv3.OpPut(k, value), clientv3.OpPut(k+"/b", value),
					clientv3.OpDelete(fmt.Sprintf("/berth/bench/%d/b", i-32))).Commit()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}

// processCPU is the process's user and system CPU so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
