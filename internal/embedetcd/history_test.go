package embedetcd

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func startTestMember(t *testing.T) *Server {
	t.Helper()
	srv, err := Start(Config{
		DataDir:   filepath.Join(t.TempDir(), "etcd"),
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// History gives exactly what a watch of the prefix from the same
// revision delivers up to the same revision: every put and delete under
// the prefix (several at one revision from one transaction), none outside
// it, in revision order, whatever the window it reads in.
func TestHistoryIsWhatAWatchDelivers(t *testing.T) {
	srv := startTestMember(t)
	cli := srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start, err := cli.Put(ctx, "/p/before", "x")
	if err != nil {
		t.Fatal(err)
	}
	from := start.Header.Revision
	var to int64
	for i := range 12 {
		k := fmt.Sprintf("/p/k%d", i%4)
		ops := []clientv3.Op{clientv3.OpPut(k, "v"), clientv3.OpPut("/q/outside", "v")}
		switch i % 3 {
		case 1:
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/p/other%d", i), "v"))
		case 2:
			ops = []clientv3.Op{clientv3.OpDelete(k), clientv3.OpPut("/p/same-txn", fmt.Sprint(i))}
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		to = resp.Header.Revision
	}
	if _, err := cli.Put(ctx, "/p/after", "x"); err != nil {
		t.Fatal(err)
	}

	change := func(key []byte, rev int64, del bool) string { return fmt.Sprintf("%d %s deleted=%v", rev, key, del) }
	var want []string
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	for resp := range cli.Watch(wctx, "/p/", clientv3.WithPrefix(), clientv3.WithRev(from+1)) {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		done := false
		for _, ev := range resp.Events {
			if ev.Kv.ModRevision > to {
				done = true
				break
			}
			want = append(want, change(ev.Kv.Key, ev.Kv.ModRevision, ev.Type == clientv3.EventTypeDelete))
		}
		if done {
			break
		}
	}
	wcancel()
	if len(want) < 12 {
		t.Fatalf("the watch delivered %d changes, want at least 12: %q", len(want), want)
	}
	for _, window := range []int64{1000, 1, 5} {
		t.Run(fmt.Sprintf("window %d", window), func(t *testing.T) {
			defer func(w int64) { historyWindow = w }(historyWindow)
			historyWindow = window
			var got []string
			err := srv.History("/p/", from, to, func(c Change) { got = append(got, change(c.Key, c.Revision, c.Deleted)) })
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("History:\n%s\nwant what the watch delivered:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// History refuses a range that begins at or below the compacted revision
// rather than count what is left of it, and a range past the member's
// revision.
func TestHistoryRefusesCompactedAndFutureRevisions(t *testing.T) {
	srv := startTestMember(t)
	cli := srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var revs []int64
	for i := range 5 {
		resp, err := cli.Put(ctx, "/p/k", fmt.Sprint(i))
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, resp.Header.Revision)
	}
	if _, err := cli.Compact(ctx, revs[2], clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc     string
		from, to int64
		ok       bool
	}{
		{desc: "from below the compaction", from: revs[0], to: revs[4]},
		{desc: "from the compacted revision's predecessor", from: revs[1], to: revs[4]},
		{desc: "from the compacted revision", from: revs[2], to: revs[4], ok: true},
		{desc: "past the member's revision", from: revs[2], to: revs[4] + 10},
	} {
		n := 0
		err := srv.History("/p/", tc.from, tc.to, func(Change) { n++ })
		if (err == nil) != tc.ok {
			t.Errorf("%s: error %v, want ok=%v", tc.desc, err, tc.ok)
		}
		if tc.ok && n != int(tc.to-tc.from) {
			t.Errorf("%s: %d changes, want %d", tc.desc, n, tc.to-tc.from)
		}
	}
}

// One WatchClient stream with a watch per prefix delivers their events in
// the member's order: by revision across the watches, each with its own
// filter applied.
func TestWatchClientOrdersSeveralPrefixes(t *testing.T) {
	srv := startTestMember(t)
	cli := srv.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := srv.WatchClient().Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		prefix string
		filter pb.WatchCreateRequest_FilterType
	}{{"/a/", pb.WatchCreateRequest_NODELETE}, {"/b/", pb.WatchCreateRequest_NOPUT}} {
		req := &pb.WatchCreateRequest{Key: []byte(w.prefix), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(w.prefix)),
			Filters: []pb.WatchCreateRequest_FilterType{w.filter}}
		if err := stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: req}}); err != nil {
			t.Fatal(err)
		}
	}
	for created := 0; created < 2; {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.Created {
			created++
		}
	}
	var want []string
	for i := range 20 {
		a, b := fmt.Sprintf("/a/%d", i), fmt.Sprintf("/b/%d", i)
		if _, err := cli.Put(ctx, b, "v"); err != nil { // filtered out
			t.Fatal(err)
		}
		resp, err := cli.Put(ctx, a, "v")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%d put %s", resp.Header.Revision, a))
		dresp, err := cli.Delete(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%d delete %s", dresp.Header.Revision, b))
		if _, err := cli.Delete(ctx, a); err != nil { // filtered out
			t.Fatal(err)
		}
	}
	var got []string
	for len(got) < len(want) {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			got = append(got, fmt.Sprintf("%d %s %s", ev.Kv.ModRevision, strings.ToLower(ev.Type.String()), ev.Kv.Key))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("delivered:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cancel()
}
