package placement

import (
	"context"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// populateNested writes n compute trees straight into etcd: a root with
// VCPU and MEMORY_MB and two NUMA children with CUSTOM_PCPU and
// CUSTOM_VF each (the nested shape a multi-group request searches).
func populateNested(b testing.TB, cli *clientv3.Client, keys etcdschema.Keys, n int) {
	b.Helper()
	ctx := context.Background()
	var ops []clientv3.Op
	flush := func() {
		if len(ops) == 0 {
			return
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
		ops = ops[:0]
	}
	put := func(p *etcdschema.Provider) {
		normalizeProvider(p)
		ops = append(ops, clientv3.OpPut(keys.Provider(p.UUID), etcdschema.MustEncode(p)))
		if len(ops) == 99 {
			flush()
		}
	}
	for i := 0; i < n; i++ {
		root := fmt.Sprintf("00000000-0000-0000-0000-%012d", 3*i)
		put(&etcdschema.Provider{UUID: root, Name: fmt.Sprintf("host%d", i), RootProviderUUID: root,
			Inventories: map[string]etcdschema.Inventory{VCPU: inv(64), MemoryMB: inv(262144)}})
		for k := 1; k <= 2; k++ {
			u := fmt.Sprintf("00000000-0000-0000-0000-%012d", 3*i+k)
			put(&etcdschema.Provider{UUID: u, Name: fmt.Sprintf("host%d-numa%d", i, k), RootProviderUUID: root, ParentProviderUUID: root,
				Inventories: map[string]etcdschema.Inventory{"CUSTOM_PCPU": inv(16), "CUSTOM_VF": inv(8)}})
		}
	}
	flush()
}

// benchNestedQuery asks for a server with two dedicated-CPU groups and a
// VF group: per tree 2*2*2 combinations, as Nova's NUMA and port
// requests make them.
var benchNestedQuery = CandidateQuery{Limit: 1000, GroupPolicy: "none", Groups: []RequestGroup{
	{Resources: map[string]int64{VCPU: 2, MemoryMB: 4096}},
	{Suffix: "1", Resources: map[string]int64{"CUSTOM_PCPU": 2}},
	{Suffix: "2", Resources: map[string]int64{"CUSTOM_PCPU": 2}},
	{Suffix: "3", Resources: map[string]int64{"CUSTOM_VF": 1}},
}}

func benchCandidatesNested(b *testing.B, trees int, q CandidateQuery, want int) {
	s, cli := newStarted(b)
	populateNested(b, cli, s.keys, trees)
	syncIdx(b, s)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := s.AllocationCandidates(ctx, q)
		if err != nil || len(c.AllocationRequests) != want {
			b.Fatalf("%v %d", err, len(c.AllocationRequests))
		}
	}
}

// BenchmarkCandidatesNested1k is a four-group request over 1,000
// three-provider trees, limited to 1,000 answers.
func BenchmarkCandidatesNested1k(b *testing.B) {
	benchCandidatesNested(b, 1000, benchNestedQuery, 1000)
}

// BenchmarkCandidatesNestedAll100 is the same request over 100 trees with
// no limit: every combination is built (800 answers).
func BenchmarkCandidatesNestedAll100(b *testing.B) {
	q := benchNestedQuery
	q.Limit = 0
	benchCandidatesNested(b, 100, q, 800)
}
