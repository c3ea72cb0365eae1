package scheduler

import (
	"context"
	"testing"
	"unsafe"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

func (c *cloud) info(host, uuid string) {
	c.t.Helper()
	c.put(c.keys.HostInstance(host, uuid), &etcdschema.InstanceInfo{UUID: uuid, Host: host, State: "active"})
}

func (c *cloud) hostSync(host string, uuids ...string) {
	c.t.Helper()
	c.put(c.keys.HostSync(host), &etcdschema.HostSync{Host: host, UUIDs: append([]string{}, uuids...)})
}

func trusted(c *cloud, host string) bool {
	v, _ := c.hosts.view(host)
	return v.Updated
}

func TestHostManagerTrustsAHostOnlyAfterItsSync(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	c.info("a", "i1")
	testwait.Until(t, "i1 cached", func() bool { v, _ := c.hosts.view("a"); return v.Instances["i1"] != nil })
	if trusted(c, "a") {
		t.Fatal("a host that never sent its uuid list is trusted")
	}
	c.hostSync("a", "i1")
	testwait.Until(t, "a trusted after an equal sync", func() bool { return trusted(c, "a") })
}

func TestHostManagerReReadsAHostWhoseSyncDiffers(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	c.info("a", "i1")
	c.info("a", "i2")
	c.hostSync("a", "i1", "i2")
	testwait.Until(t, "a trusted", func() bool { return trusted(c, "a") })

	// Lose an update, as a missed message would in Nova: the cache now
	// lacks i2 while etcd has it.
	c.hosts.mu.Lock()
	c.hosts.hosts["a"].instances = map[string]*etcdschema.InstanceInfo{"i1": c.hosts.hosts["a"].instances["i1"]}
	c.hosts.mu.Unlock()
	c.hostSync("a", "i1", "i2")
	testwait.Until(t, "a re-read from etcd", func() bool {
		v, _ := c.hosts.view("a")
		return v.Updated && v.Instances["i2"] != nil && len(v.Instances) == 2
	})
}

func TestNeverReportedHostIsReadFromCellsPerRequest(t *testing.T) {
	c := newCloud(t)
	c.addHost("old", "cell1", 8, 8192, false) // an older agent: no instance info, no sync
	c.addHost("new", "cell1", 8, 8192, false)
	c.hostSync("new")
	testwait.Until(t, "new trusted", func() bool { return trusted(c, "new") })
	// The cell says "victim" runs on old; old never told the schedulers.
	c.put(c.keys.CellInstance("cell1", "victim"), &etcdschema.Instance{UUID: "victim", Host: "old", Status: etcdschema.StatusActive, Cell: "cell1"})
	s := c.scheduler(Config{MaxAttempts: 1, HostSubsetSize: 1, MaxPlacementResults: 1000,
		EnabledFilters: []string{"ComputeFilter", "SameHostFilter"}, Weights: map[string]float64{"ram": 1}})
	sp := spec(1, 512, "buddy")
	sp.Hints.SameHost = []string{"victim"}
	sels, err := s.SelectDestinations(c.ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	if sels[0][0].ServiceHost != "old" {
		t.Fatalf("same_host placed on %s; old's instances were not read from its cell", sels[0][0].ServiceHost)
	}
	// Once old reports, its (empty) cache is trusted and the cell is not read.
	c.hostSync("old")
	testwait.Until(t, "old trusted", func() bool { return trusted(c, "old") })
	sp = spec(1, 512, "buddy2")
	sp.Hints.SameHost = []string{"victim"}
	if _, err := s.SelectDestinations(c.ctx, sp); err == nil {
		t.Fatal("old's trusted cache does not hold victim, yet same_host passed it")
	}
}

func TestTrackInstanceChangesOff(t *testing.T) {
	c := newCloud(t)
	hm := NewHostManager(c.cli, c.keys, hclog.NewNullLogger(), WithTrackInstanceChanges(false))
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	go hm.Run(ctx)
	if err := hm.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	c.addHost("a", "cell1", 8, 8192, false)
	c.addHost("b", "cell1", 8, 8192, false)
	c.info("a", "stale-info") // written by an agent still tracking: ignored
	c.hostSync("a", "stale-info")
	c.put(c.keys.CellInstance("cell1", "x"), &etcdschema.Instance{UUID: "x", Host: "b", Status: etcdschema.StatusActive, Cell: "cell1"})
	testwait.Until(t, "hosts seen", func() bool { _, ok := hm.view("b"); _, ok2 := hm.view("a"); return ok && ok2 })
	if v, _ := hm.view("a"); v.Updated || len(v.Instances) != 0 {
		t.Fatalf("tracking is off but a has a trusted cache: %+v", v)
	}
	s, err := New(Config{MaxAttempts: 1, HostSubsetSize: 1, MaxPlacementResults: 1000,
		EnabledFilters: []string{"DifferentHostFilter"}, Weights: map[string]float64{"ram": 1}}, c.place, hm, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		sp := spec(1, 256, "y"+string(rune('0'+i)))
		sp.Hints.DifferentHost = []string{"x"}
		sels, err := s.SelectDestinations(c.ctx, sp)
		if err != nil {
			t.Fatal(err)
		}
		if sels[0][0].ServiceHost != "a" {
			t.Fatalf("different_host from x placed on %s; b's instances were not read from etcd", sels[0][0].ServiceHost)
		}
	}
}

// TestHostManagerListPageByPage: a host manager started on a populated
// etcd builds its state from the list page by page (ResetPaged): hosts,
// services, instances and providers as listed, a host whose sync matches
// its listed instances trusted, and one whose sync differs re-read from
// etcd after the list (then trusted with etcd's instances).
func TestHostManagerListPageByPage(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	c.addHost("b", "cell1", 8, 8192, false)
	c.info("a", "i1")
	c.info("a", "i2")
	c.hostSync("a", "i1", "i2")
	c.info("b", "i3")
	c.info("b", "i4")
	c.hostSync("b", "i3") // differs from b's listed instances

	hm := NewHostManager(c.cli, c.keys, hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go hm.Run(ctx)
	if err := hm.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if h, ok := hm.HostForProvider("rp-a"); !ok || h != "a" {
		t.Errorf("provider rp-a maps to %q, %v; want a", h, ok)
	}
	v, ok := hm.view("a")
	if !ok || !v.Updated || len(v.Instances) != 2 || v.Instances["i1"] == nil || v.Service == nil || v.Service.ProviderUUID != "rp-a" {
		t.Errorf("host a after the list: %+v, %v; want trusted with i1 and i2", v, ok)
	}
	testwait.Until(t, "b re-read after the list", func() bool {
		v, _ := hm.view("b")
		return v.Updated && len(v.Instances) == 2 && v.Instances["i4"] != nil
	})
}

// TestHostManagerSharesInstanceStrings: the instance info a host manager
// keeps, listed at its start or followed after, holds the host's name
// and each flavor's strings once, and reads as written.
func TestHostManagerSharesInstanceStrings(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	c.addHost("b", "cell1", 8, 8192, false)
	put := func(host, uuid string) {
		c.put(c.keys.HostInstance(host, uuid), &etcdschema.InstanceInfo{UUID: uuid, Host: host, FlavorID: "2", Flavor: "m1.small", State: "active"})
	}
	put("a", "i1")
	put("a", "i2")
	put("b", "i3")

	hm := NewHostManager(c.cli, c.keys, hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go hm.Run(ctx)
	if err := hm.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	put("b", "i4") // followed, not listed
	testwait.Until(t, "i4 followed", func() bool { v, _ := hm.view("b"); return v.Instances["i4"] != nil })

	hm.mu.RLock()
	defer hm.mu.RUnlock()
	var flavor *byte
	for _, want := range []struct{ host, uuid string }{{"a", "i1"}, {"a", "i2"}, {"b", "i3"}, {"b", "i4"}} {
		r := hm.hosts[want.host]
		info := r.instances[want.uuid]
		if info == nil || info.UUID != want.uuid || info.Host != want.host || info.Flavor != "m1.small" || info.FlavorID != "2" {
			t.Fatalf("%s on %s: %+v", want.uuid, want.host, info)
		}
		if unsafe.StringData(info.Host) != unsafe.StringData(r.name) {
			t.Errorf("%s: its host name is a copy, not the host record's", want.uuid)
		}
		if flavor == nil {
			flavor = unsafe.StringData(info.Flavor)
		} else if unsafe.StringData(info.Flavor) != flavor {
			t.Errorf("%s: its flavor name is a copy of its own", want.uuid)
		}
	}
}
