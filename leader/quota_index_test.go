package leader

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// TestQuotaIndexDutyBuildsTheIndex: a leader over records written
// before the per-project quota index builds it (an upgrade), and builds
// it again when a mapping appears without its entry.
func TestQuotaIndexDutyBuildsTheIndex(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/qidx")
	ctx, cancel := context.WithCancel(context.Background())
	mapping := func(uuid, project string) {
		t.Helper()
		if _, err := cli.Put(ctx, keys.InstanceMapping(uuid), etcdschema.MustEncode(&etcdschema.InstanceMapping{
			InstanceUUID: uuid, ProjectID: project})); err != nil {
			t.Fatal(err)
		}
	}
	mapping("u1", "p")
	mapping("u2", "q")
	l := New(Config{Client: cli, Keys: keys, Election: testElection, ID: "t", TTL: 5 * time.Second, Log: hclog.NewNullLogger(),
		Duties: []Duty{QuotaIndexDuty(cli, keys, 100*time.Millisecond, "t", nil)}})
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	indexed := func(want ...string) func() bool {
		return func() bool {
			for i := 0; i+1 < len(want); i += 2 {
				resp, err := cli.Get(ctx, keys.QuotaInstance(want[i], want[i+1]), clientv3.WithCountOnly())
				if err != nil || resp.Count != 1 {
					return false
				}
			}
			resp, err := cli.Get(ctx, keys.QuotaIndex(), clientv3.WithCountOnly())
			return err == nil && resp.Count == 1
		}
	}
	testwait.Until(t, "the index built by the leader", indexed("p", "u1", "q", "u2"))
	mapping("u3", "p") // an older Berth's create
	testwait.Until(t, "u3 indexed at the next sweep", indexed("p", "u3"))
}
