package leader

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/metrics"
)

// TestCountServers counts over more records than one page, at one
// revision, skipping the cells' other records.
func TestCountServers(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put := func(key string, v etcdschema.Versioned) {
		t.Helper()
		if _, err := cli.Put(ctx, key, etcdschema.MustEncode(v)); err != nil {
			t.Fatal(err)
		}
	}
	put(keys.Cell("cell1"), &etcdschema.Cell{Name: "cell1"})
	for i := 0; i < serverCountPage+5; i++ {
		status := etcdschema.StatusActive
		if i%100 == 0 {
			status = etcdschema.StatusBuild
		}
		u := fmt.Sprintf("a-%04d", i)
		put(keys.CellInstance("cell1", u), &etcdschema.Instance{UUID: u, Cell: "cell1", Status: status})
	}
	for i := 0; i < 3; i++ {
		u := fmt.Sprintf("e-%d", i)
		put(keys.CellInstance(etcdschema.Cell0, u), &etcdschema.Instance{UUID: u, Cell: etcdschema.Cell0, Status: etcdschema.StatusError})
	}
	put(keys.BuildRequest("b-1"), &etcdschema.BuildRequest{InstanceUUID: "b-1"})
	got, err := CountServers(ctx, cli, keys)
	if err != nil {
		t.Fatal(err)
	}
	want := map[metrics.ServerKey]int{
		{Status: "ACTIVE", Cell: "cell1"}: serverCountPage + 5 - 11,
		{Status: "BUILD", Cell: "cell1"}:  11,
		{Status: "ERROR", Cell: "cell0"}:  3,
		{Status: "BUILD", Cell: "none"}:   1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestServerCountDutyRecordsCounts: the duty keeps its counts in etcd
// for the console, under the term's fence, writing again only when they
// changed.
func TestServerCountDutyRecordsCounts(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/tsc")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put := func(key string, v etcdschema.Versioned) {
		t.Helper()
		if _, err := cli.Put(ctx, key, etcdschema.MustEncode(v)); err != nil {
			t.Fatal(err)
		}
	}
	fenceKey := keys.All() + "test-leader"
	resp, err := cli.Put(ctx, fenceKey, "t")
	if err != nil {
		t.Fatal(err)
	}
	f := Fence{Key: fenceKey, Rev: resp.Header.Revision}
	duty := ServerCountDuty(cli, keys, time.Second, metrics.New())
	record := func() (etcdschema.ServerCounts, int64) {
		t.Helper()
		if err := duty.Run(ctx, f); err != nil {
			t.Fatal(err)
		}
		r, err := cli.Get(ctx, keys.ServerCounts())
		if err != nil || len(r.Kvs) != 1 {
			t.Fatalf("read the counts: %v (%d keys)", err, len(r.Kvs))
		}
		var rec etcdschema.ServerCounts
		if err := etcdschema.Decode(string(r.Kvs[0].Key), r.Kvs[0].Value, &rec); err != nil {
			t.Fatal(err)
		}
		return rec, r.Kvs[0].ModRevision
	}
	put(keys.CellInstance("cell1", "a"), &etcdschema.Instance{UUID: "a", Cell: "cell1", Status: "ACTIVE"})
	rec, mod := record()
	if want := []etcdschema.ServerCount{{Status: "ACTIVE", Cell: "cell1", Count: 1}}; !cmp.Equal(rec.Counts, want) || rec.Revision == 0 {
		t.Fatalf("recorded %+v, want %+v at a revision", rec, want)
	}
	if _, again := record(); again != mod {
		t.Errorf("unchanged counts written again (mod revision %d, then %d)", mod, again)
	}
	put(keys.BuildRequest("b"), &etcdschema.BuildRequest{InstanceUUID: "b"})
	rec, _ = record()
	if want := []etcdschema.ServerCount{{Status: "ACTIVE", Cell: "cell1", Count: 1}, {Status: "BUILD", Cell: "none", Count: 1}}; !cmp.Equal(rec.Counts, want) {
		t.Errorf("after a create, recorded %+v, want %+v", rec.Counts, want)
	}
	// A deposed term writes nothing.
	if err := duty.Run(ctx, Fence{Key: fenceKey, Rev: f.Rev + 1000}); err == nil {
		t.Error("a deposed term's count was written")
	}
}
