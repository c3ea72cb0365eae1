package placement

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
)

type clientv3Op = clientv3.Op

func opPut(k, v string) clientv3.Op { return clientv3.OpPut(k, v) }

// TestModRevisionIsCompare: modRevisionIs is the compare clientv3.Compare
// makes, field for field, and each one is its own.
func TestModRevisionIsCompare(t *testing.T) {
	for _, rev := range []int64{0, 1, 7, 1 << 40} {
		for _, key := range []string{"/test/placement/consumers/c1", "", "/k"} {
			got, want := modRevisionIs(key, rev), clientv3.Compare(clientv3.ModRevision(key), "=", rev)
			if !proto.Equal(got.GetCompare(), want.GetCompare()) {
				t.Errorf("modRevisionIs(%q, %d) = %v, want %v", key, rev, got.GetCompare(), want.GetCompare())
			}
		}
	}
	a, b := modRevisionIs("/k", 1), modRevisionIs("/k", 2)
	if a.GetCompare() == b.GetCompare() || &a.KeyBytes()[0] == &b.KeyBytes()[0] {
		t.Error("two compares share their message or key")
	}
}
