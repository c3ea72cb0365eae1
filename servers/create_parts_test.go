package servers

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/berth-project/berth/etcdschema"
)

// TestPartTxnComparesAsPartRequests: a create stored alone (partTxn,
// clientv3's builders) and one batched (partRequests, etcd's messages)
// put the same comparisons on the wire for the first part: the group's
// existence and each checked record's revision; later parts of an alone
// create compare the group only.
func TestPartTxnComparesAsPartRequests(t *testing.T) {
	s := New(nil, etcdschema.New("/parts"), noAllocations{}, nil)
	req := CreateRequest{ProjectID: "p", Hints: etcdschema.SchedulerHints{Group: "g"},
		Checked: []CheckedRecord{{Key: "/parts/flavors/1", ModRevision: 7}, {Key: "/parts/images/i", ModRevision: 0}}}
	brs := newReservation(req, 2).BuildRequests
	want, _ := s.partRequests(req, brs)
	if len(want) != 3 {
		t.Fatalf("batched create compares %d records, want 3 (group, two checked)", len(want))
	}
	for _, first := range []bool{true, false} {
		cmps, _ := s.partTxn(req, brs, first)
		n := len(want)
		if !first {
			n = 1
		}
		if len(cmps) != n {
			t.Fatalf("first=%v: alone create compares %d records, want %d", first, len(cmps), n)
		}
		for i := range cmps {
			if got := cmps[i].GetCompare(); !proto.Equal(got, want[i]) {
				t.Errorf("first=%v: comparison %d is %v alone and %v batched", first, i, got, want[i])
			}
		}
	}
}
