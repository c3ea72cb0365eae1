package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// populate writes n compute providers with VCPU, MEMORY_MB and DISK_GB
// straight into etcd (100 a transaction), every tenth one disabled.
func populate(b testing.TB, cli *clientv3.Client, keys etcdschema.Keys, n int) {
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
	for i := 0; i < n; i++ {
		uuid := fmt.Sprintf("00000000-0000-0000-0000-%012d", i)
		p := &etcdschema.Provider{UUID: uuid, Name: fmt.Sprintf("host%d", i), RootProviderUUID: uuid,
			Usages: map[string]int64{}, Traits: []string{}, Aggregates: []string{}}
		p.Inventories = map[string]etcdschema.Inventory{placement.VCPU: inv(64), placement.MemoryMB: inv(262144), placement.DiskGB: inv(2000)}
		if i%10 == 0 {
			p.Traits = []string{placement.TraitComputeStatusDisabled}
		}
		ops = append(ops, clientv3.OpPut(keys.Provider(p.UUID), etcdschema.MustEncode(p)))
		if len(ops) == 100 {
			flush()
		}
	}
	flush()
}

func benchCandidatesHTTP(b *testing.B, n int) {
	s, cli := newStarted(b)
	populate(b, cli, testKeys, n)
	if err := s.SyncIndex(testCtx(b)); err != nil {
		b.Fatal(err)
	}
	srv := newServer(b, s)
	url := srv.URL + "/allocation_candidates?resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&required=!COMPUTE_STATUS_DISABLED&limit=1000"
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("X-Auth-Token", "admin")
		req.Header.Set("OpenStack-API-Version", "placement 1.35")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%v %v", err, resp)
		}
		resp.Body.Close()
	}
}

func BenchmarkCandidatesHTTP10k(b *testing.B)  { benchCandidatesHTTP(b, 10_000) }
func BenchmarkCandidatesHTTP100k(b *testing.B) { benchCandidatesHTTP(b, 100_000) }
