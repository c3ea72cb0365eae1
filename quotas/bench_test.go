package quotas

import (
	"context"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// BenchmarkReserveServers is one create's quota check (count at one
// revision, check, guard) in a project of 10 servers, beside others'
// servers: the count reads every instance mapping, so it grows with the
// deployment, and three records per server of the project.
func BenchmarkReserveServers(b *testing.B) {
	for _, others := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("%d other servers", others), func(b *testing.B) {
			cli := etcdtest.Client(b)
			keys := etcdschema.New("/b")
			ctx := context.Background()
			flavor := etcdschema.Flavor{VCPUs: 1, RAMMB: 512}
			var ops []clientv3.Op
			flush := func() {
				if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
					b.Fatal(err)
				}
				ops = ops[:0]
			}
			for i := range others + 10 {
				project := "other"
				if i < 10 {
					project = "p"
				}
				uuid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
				ops = append(ops,
					clientv3.OpPut(keys.InstanceMapping(uuid), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: uuid, ProjectID: project})),
					clientv3.OpPut(keys.BuildRequest(uuid), etcdschema.MustEncode(&etcdschema.BuildRequest{InstanceUUID: uuid,
						ProjectID: project, Flavor: flavor})))
				if len(ops) >= 100 {
					flush()
				}
			}
			if len(ops) > 0 {
				flush()
			}
			s := New(cli, keys, Limits{Instances: 1000, Cores: 1000}, nil)
			b.ResetTimer()
			for range b.N {
				if _, _, err := s.ReserveServers(ctx, ServerRequest{Project: "p", Min: 1, Max: 1, VCPUs: 1, RAMMB: 512}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
