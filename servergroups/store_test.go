package servergroups

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// TestMembersAndDelete: a group shows the members whose server still
// exists, in creation order among groups; delete takes every key below
// the group; ids that cannot be one key segment are not found.
func TestMembersAndDelete(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	s := New(cli, keys, time.Second, nil)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range []string{"g-b", "g-a"} {
		g := &etcdschema.ServerGroup{UUID: id, Name: id, Policy: etcdschema.PolicyAntiAffinity, CreatedAt: base.Add(time.Duration(i) * time.Second)}
		if err := s.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{"i2", "i1", "gone"} {
		if _, err := cli.Put(ctx, keys.ServerGroupMember("g-b", m), etcdschema.MustEncode(&etcdschema.ServerGroupMember{InstanceUUID: m})); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{"i1", "i2"} {
		if _, err := cli.Put(ctx, keys.InstanceMapping(m), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: m})); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%s%v %s%v", all[0].UUID, all[0].Members, all[1].UUID, all[1].Members); got != "g-b[i1 i2] g-a[]" {
		t.Errorf("list: %s", got)
	}
	for _, id := range []string{"nope", "g-b/members", "", "g"} {
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("get %q: %v, want ErrNotFound", id, err)
		}
	}
	if err := s.Delete(ctx, "g-b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "g-b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	resp, err := cli.Get(ctx, keys.ServerGroupPrefix("g-b"), clientv3.WithPrefix())
	if err != nil || resp.Count != 0 {
		t.Errorf("keys left below a deleted group: %d %v", resp.Count, err)
	}
}
