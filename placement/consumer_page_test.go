package placement

import (
	"slices"
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

// TestConsumerPage: pages of consumers read from etcd follow key order
// from where the last stopped, with each record's mod revision, and
// end with no next; an unreadable record is left out without stopping
// the walk past it.
func TestConsumerPage(t *testing.T) {
	s, cli := newStarted(t)
	ctx := testCtx(t)
	mkProvider(t, s, "rp1", "", map[string]etcdschema.Inventory{VCPU: inv(16)})
	for _, u := range []string{"c1", "c2", "c4", "c5"} {
		err := s.PutAllocations(ctx, u, AllocationWrite{ProjectID: "p", UserID: "u",
			Allocations: alloc("rp1", map[string]int64{VCPU: 1})})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Put(ctx, s.keys.Consumer("c3"), "not a record"); err != nil {
		t.Fatal(err)
	}
	var walked []string
	after, pages := "", 0
	for {
		page, next, err := s.ConsumerPage(ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, cr := range page {
			resp, err := cli.Get(ctx, s.keys.Consumer(cr.Consumer.UUID))
			if err != nil {
				t.Fatal(err)
			}
			if cr.ModRev != resp.Kvs[0].ModRevision {
				t.Errorf("%s: mod revision %d, etcd has %d", cr.Consumer.UUID, cr.ModRev, resp.Kvs[0].ModRevision)
			}
			if _, ok := cr.Consumer.Allocations["rp1"]; !ok {
				t.Errorf("%s: allocations %v, want on rp1", cr.Consumer.UUID, cr.Consumer.Allocations)
			}
			walked = append(walked, cr.Consumer.UUID)
		}
		if next == "" {
			break
		}
		after = next
	}
	if want := []string{"c1", "c2", "c4", "c5"}; !slices.Equal(walked, want) || pages != 3 {
		t.Fatalf("walked %v in %d pages, want %v in 3", walked, pages, want)
	}
}
