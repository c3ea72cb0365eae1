package scheduler

import (
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// waitUntil polls cond until it holds or ten seconds pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

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
	waitUntil(t, "two builds in flight (a delete is not an io op)", func() bool { return ioOps() == 2 })
	// A build replaced by a delete cast, and a finished one, stop counting.
	put(c.keys.Build("a", "b1"), &etcdschema.Build{Op: etcdschema.OpDelete, InstanceUUID: "b1"})
	if _, err := c.cli.Delete(c.ctx, c.keys.Build("a", "b2")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "no builds in flight", func() bool { return ioOps() == 0 })

	agg := &etcdschema.Aggregate{UUID: "x", Name: "x", Hosts: []string{"a"},
		Metadata: map[string]string{"availability_zone": "az1"}}
	put(c.keys.Aggregate("x"), agg)
	waitUntil(t, "a in aggregate x", func() bool { return len(c.hosts.aggregates().byHost["a"]) == 1 })
	agg.Hosts = nil
	put(c.keys.Aggregate("x"), agg)
	waitUntil(t, "a out of aggregate x", func() bool { return len(c.hosts.aggregates().byHost["a"]) == 0 })
	if _, err := c.cli.Delete(c.ctx, c.keys.Aggregate("x")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "aggregate x gone", func() bool { return len(c.hosts.Aggregates()) == 0 })
}
