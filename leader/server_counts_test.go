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
