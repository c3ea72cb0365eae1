package scheduler

import (
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

func TestHostManagerCountsBuildsInFlightAndFollowsAggregates(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	put := func(key string, v etcdschema.Versioned) {
		if _, err := c.cli.Put(c.ctx, key, etcdschema.MustEncode(v)); err != nil {
			t.Fatal(err)
		}
	}
	ioOps := func() int { v, _ := c.hosts.view("a"); return v.IOOps }
	put(c.keys.Build("a", "b1"), &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: "b1"})
	put(c.keys.Build("a", "b2"), &etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: "b2"})
	put(c.keys.Build("a", "d1"), &etcdschema.Build{Op: etcdschema.OpDelete, InstanceUUID: "d1"})
	testwait.Equal(t, "two builds in flight (a delete is not an io op)", 2, ioOps)
	// A build replaced by a delete cast, and a finished one, stop counting.
	put(c.keys.Build("a", "b1"), &etcdschema.Build{Op: etcdschema.OpDelete, InstanceUUID: "b1"})
	if _, err := c.cli.Delete(c.ctx, c.keys.Build("a", "b2")); err != nil {
		t.Fatal(err)
	}
	testwait.Equal(t, "no builds in flight", 0, ioOps)

	agg := &etcdschema.Aggregate{UUID: "x", Name: "x", Hosts: []string{"a"},
		Metadata: map[string]string{"availability_zone": "az1"}}
	put(c.keys.Aggregate("x"), agg)
	aggregatesOfA := func() int { return len(c.hosts.aggregates().byHost["a"]) }
	testwait.Equal(t, "a in aggregate x", 1, aggregatesOfA)
	agg.Hosts = nil
	put(c.keys.Aggregate("x"), agg)
	testwait.Equal(t, "a out of aggregate x", 0, aggregatesOfA)
	if _, err := c.cli.Delete(c.ctx, c.keys.Aggregate("x")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "aggregate x gone", func() bool { return len(c.hosts.Aggregates()) == 0 })
}
