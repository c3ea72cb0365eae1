package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
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

	hm := syncedHostManager(t, c)
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

// TestHostManagerSyncSharesInstanceStrings: a host manager keeps no
// flavors of a sync that agrees with its cache, listed at its start or
// followed after; the flavors it keeps of a sync that differs (for the
// host's re-read) are keyed by the uuid strings of the instances it holds
// and give the flavor ids of its table.
func TestHostManagerSyncSharesInstanceStrings(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	put := func(uuid, flavorID string) {
		c.put(c.keys.HostInstance("a", uuid), &etcdschema.InstanceInfo{UUID: uuid, Host: "a", FlavorID: flavorID, Flavor: "m1", State: "active"})
	}
	sync := func(flavorIDs ...string) int64 {
		uuids := []string{"i1", "i2", "i3"}[:len(flavorIDs)]
		return c.put(c.keys.HostSync("a"), &etcdschema.HostSync{Host: "a", UUIDs: uuids, FlavorIDs: flavorIDs})
	}
	put("i1", "2")
	put("i2", "2")
	sync("2", "2")

	hm := syncedHostManager(t, c)
	kept := func(when string, want int) {
		t.Helper()
		hm.mu.RLock()
		defer hm.mu.RUnlock()
		r := hm.hosts["a"]
		if !hm.track || !r.synced || len(r.syncFlavors.uuids) != want || len(r.syncFlavors.ids) != want {
			t.Fatalf("%s: synced %v, flavors %v; want %d kept", when, r.synced, r.syncFlavors, want)
		}
		for i, u := range r.syncFlavors.uuids {
			f := r.syncFlavors.ids[i]
			info := r.instances[u]
			if info == nil || unsafe.StringData(u) != unsafe.StringData(info.UUID) || unsafe.StringData(f) != unsafe.StringData(info.FlavorID) {
				t.Errorf("%s: the sync's %s (flavor %s) are copies, not the held instance's strings", when, u, f)
			}
		}
	}
	kept("listed, agreeing", 0)
	put("i3", "2") // followed, not listed
	testwait.Until(t, "i3 followed", func() bool { v, _ := hm.view("a"); return v.Instances["i3"] != nil })
	// A sync whose flavor of i1 differs from the cache's (no instance
	// record to correct it from): kept for the re-read.
	if err := hm.WaitForRevision(c.ctx, sync("3", "2", "2")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "a re-read", func() bool { v, _ := hm.view("a"); return v.Updated })
	hm.mu.RLock()
	got := hm.hosts["a"].syncFlavors.asMap()
	hm.mu.RUnlock()
	if !maps.Equal(got, map[string]string{"i1": "3", "i2": "2", "i3": "2"}) {
		t.Fatalf("a differing sync's flavors kept = %v", got)
	}
	put("i1", "3")
	testwait.Until(t, "i1's new flavor followed", func() bool { v, _ := hm.view("a"); return v.Instances["i1"].FlavorID == "3" })
	if err := hm.WaitForRevision(c.ctx, sync("3", "2", "2")); err != nil {
		t.Fatal(err)
	}
	kept("followed, agreeing", 0)
}

// TestHostManagerListKeepsNoBorrowedBytes: a host manager's list hands
// it etcd's chunks in place (informer.PagedResetter), each reused for a
// later one; over a networked client (RangeStream, many chunks) every
// host name, provider, instance, build and sync flavor it keeps reads as
// written once the list is done, so none of them is still the list's
// bytes. Each service record is padded (16 KB) so that etcd's chunks
// reach their full size early and the list reuses its buffers.
func TestHostManagerListKeepsNoBorrowedBytes(t *testing.T) {
	_, cli := etcdtest.NetClient(t)
	keys := etcdschema.New("/t")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const hosts, perHost = 300, 3
	pad := strings.Repeat("x", 16<<10)
	host := func(i int) string { return fmt.Sprintf("host-%03d", i) }
	uuid := func(i, j int) string { return fmt.Sprintf("%08d-0000-4000-8000-%012d", i, j) }
	for i := range hosts {
		h := host(i)
		ops := []clientv3.Op{
			clientv3.OpPut(keys.Service(h), etcdschema.MustEncode(&etcdschema.Service{Host: h, Cell: "cell1", ProviderUUID: "rp-" + h, DisabledReason: pad})),
			clientv3.OpPut(keys.Alive(h), etcdschema.MustEncode(&etcdschema.Alive{Host: h})),
			clientv3.OpPut(keys.Build(h, "build-"+h), etcdschema.MustEncode(&etcdschema.Build{Op: etcdschema.OpBuild, InstanceUUID: "build-" + h})),
		}
		sync := &etcdschema.HostSync{Host: h}
		for j := range perHost {
			u := uuid(i, j)
			sync.UUIDs, sync.FlavorIDs = append(sync.UUIDs, u), append(sync.FlavorIDs, fmt.Sprint(j))
			ops = append(ops, clientv3.OpPut(keys.HostInstance(h, u), etcdschema.MustEncode(&etcdschema.InstanceInfo{
				UUID: u, Host: h, FlavorID: fmt.Sprint(j), Flavor: "m1", State: "active"})))
		}
		ops = append(ops, clientv3.OpPut(keys.HostSync(h), etcdschema.MustEncode(sync)))
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatal(err)
		}
	}
	hm := NewHostManager(cli, keys, hclog.NewNullLogger())
	go hm.Run(ctx)
	if err := hm.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	hm.mu.RLock()
	defer hm.mu.RUnlock()
	if len(hm.hosts) != hosts {
		t.Fatalf("%d hosts listed, want %d", len(hm.hosts), hosts)
	}
	for i := range hosts {
		h := host(i)
		r := hm.hosts[h]
		if r == nil || r.name != h || !r.alive || r.service == nil || hm.byProvider["rp-"+h] != r {
			t.Fatalf("%s: record %+v", h, r)
		}
		if !r.synced || r.stale || len(r.instances) != perHost || len(r.syncFlavors.uuids) != 0 || !r.builds["build-"+h] || len(r.builds) != 1 {
			t.Fatalf("%s: synced %v stale %v, instances %v, sync flavors %v, builds %v", h, r.synced, r.stale,
				slices.Sorted(maps.Keys(r.instances)), r.syncFlavors, r.builds)
		}
		for j := range perHost {
			u := uuid(i, j)
			info := r.instances[u]
			if info == nil || info.UUID != u || info.Host != h || info.FlavorID != fmt.Sprint(j) {
				t.Fatalf("%s: instance %s is %+v", h, u, info)
			}
		}
	}
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

	hm := syncedHostManager(t, c)
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

// syncedHostManager runs a host manager on c's etcd until the test ends
// and returns it synced.
func syncedHostManager(t *testing.T, c *cloud) *HostManager {
	t.Helper()
	hm := NewHostManager(c.cli, c.keys, hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go hm.Run(ctx)
	if err := hm.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return hm
}

// asMap is sf by uuid (the known flavors), as tests compare it.
func (sf syncedFlavors) asMap() map[string]string {
	m := map[string]string{}
	sf.each(func(u, f string) { m[u] = f })
	return m
}
