package informer

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// watchStreams is etcd's count of open watch streams (one per gRPC
// stream) in this process's member.
func watchStreams(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "etcd_debugging_mvcc_watch_stream_total" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("etcd_debugging_mvcc_watch_stream_total not registered")
	return 0
}

// waitStreams polls until etcd counts want watch streams.
func waitStreams(t *testing.T, want float64) {
	t.Helper()
	testwait.Equal(t, "etcd's count of watch streams", want, func() float64 { return watchStreams(t) })
}

// An informer with OwnStream watches on a gRPC stream of its own, so one
// prefix's burst cannot fill the buffer etcd keeps per stream and send
// the other informers' watchers to the backend (watchContext); the others
// share one. Watches that share a context's metadata share a stream, as
// this test's control shows.
func TestInformersWatchOnStreamsOfTheirOwn(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := watchStreams(t)

	// Control: two plain watches with the same metadata, one stream.
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	cli.Watch(wctx, "/x/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	cli.Watch(wctx, "/y/", clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	waitStreams(t, base+1)
	wcancel()
	waitStreams(t, base)

	// Three with streams of their own, two sharing one.
	prefixes := []string{"/a/", "/b/", "/c/", "/d/", "/e/"}
	recs := make([]*recorder, len(prefixes))
	for i, p := range prefixes {
		recs[i] = &recorder{}
		var opts []Option
		if i < 3 {
			opts = append(opts, OwnStream())
		}
		in := New(cli, p, recs[i], hclog.NewNullLogger(), opts...)
		go in.Run(ctx)
		if err := in.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitStreams(t, base+4)
	// And each still follows its prefix.
	for i, p := range prefixes {
		if _, err := cli.Put(ctx, p+"k", p); err != nil {
			t.Fatal(err)
		}
		testwait.Until(t, "the informer of "+p+" to see its put", func() bool { return recs[i].get(p+"k") == p })
	}
}
