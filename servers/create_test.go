package servers

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/quotas"
)

// A create stores its servers only while the records it was checked
// against are at the revisions it read: one changed, or deleted, makes it
// store nothing and say so (ErrCheckedRecordChanged), with or without the
// quota check (whose own retry must not mistake it for a usage change).
func TestCreateComparesCheckedRecords(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	flavorKey := keys.Flavor("m1.tiny")
	put, err := cli.Put(ctx, flavorKey, "{}")
	if err != nil {
		t.Fatal(err)
	}
	read := put.Header.Revision
	for _, tc := range []struct {
		desc   string
		quotas bool
		change func() // nil: the record is as read
		want   error
	}{
		{desc: "unchanged", want: nil},
		{desc: "unchanged, quotas", quotas: true, want: nil},
		{desc: "rewritten", change: func() { cli.Put(ctx, flavorKey, `{"x": 1}`) }, want: ErrCheckedRecordChanged},
		{desc: "rewritten, quotas", quotas: true, change: func() { cli.Put(ctx, flavorKey, `{}`) }, want: ErrCheckedRecordChanged},
		{desc: "deleted, quotas", quotas: true, change: func() { cli.Delete(ctx, flavorKey) }, want: ErrCheckedRecordChanged},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := New(cli, keys, noAllocations{}, nil)
			if tc.quotas {
				s.SetQuotas(quotas.New(cli, keys, quotas.Limits{quotas.Instances: quotas.Unlimited,
					quotas.Cores: quotas.Unlimited, quotas.RAM: quotas.Unlimited}, nil))
			}
			if tc.change != nil {
				tc.change()
			}
			before, err := cli.Get(ctx, keys.BuildRequests(), clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Create(ctx, CreateRequest{Name: "web", Count: 2, ProjectID: "p", UserID: "u",
				Flavor:  etcdschema.Flavor{ID: "1", Name: "m1.tiny", VCPUs: 1, RAMMB: 512},
				Checked: []CheckedRecord{{Key: flavorKey, ModRevision: read}}})
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("create: %v, want %v", err, tc.want)
			}
			after, err := cli.Get(ctx, keys.BuildRequests(), clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				t.Fatal(err)
			}
			stored := after.Count - before.Count
			if want := map[bool]int64{true: 2, false: 0}[tc.want == nil]; stored != want {
				t.Errorf("%d build requests stored, want %d", stored, want)
			}
		})
	}
}
