package scheduler

import (
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

func TestSyncDiffers(t *testing.T) {
	cached := map[string]*etcdschema.InstanceInfo{"a": {UUID: "a", FlavorID: "1"}, "b": {UUID: "b", FlavorID: "2"}}
	for _, tc := range []struct {
		desc    string
		uuids   []string
		flavors []string // the sync's flavor ids, paired with uuids
		want    string
	}{
		{"same uuids, uuid-only list", []string{"a", "b"}, nil, ""},
		{"same uuids and flavors", []string{"b", "a"}, []string{"2", "1"}, ""},
		{"a flavor unknown (move source) is not compared", []string{"a", "b"}, []string{"", "2"}, ""},
		{"a resize the cache missed", []string{"a", "b"}, []string{"3", "2"}, "flavor"},
		{"flavors that do not pair are not compared", []string{"a", "b"}, []string{"3"}, ""},
		{"an instance missing", []string{"a"}, nil, "instances"},
		{"another instance", []string{"a", "c"}, []string{"1", "1"}, "instances"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			synced := syncedFlavorsOf(&etcdschema.HostSync{UUIDs: tc.uuids, FlavorIDs: tc.flavors})
			if got := syncDiffers(tc.uuids, synced, cached); got != tc.want {
				t.Errorf("syncDiffers = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSyncCatchesALostResize is the case seed isolate-scheduler-db leaves
// open: a resize whose instance info update was lost. The instance record
// has the new flavor, the host's instance info (and so every scheduler's
// view) the old one. A uuid-only sync (an older agent's) sees nothing
// wrong; one sync with the flavors makes the scheduler re-read the host
// and take the record's flavor.
func TestSyncCatchesALostResize(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 8, 8192, false)
	small := etcdschema.Flavor{ID: "1", Name: "small", VCPUs: 1, RAMMB: 512}
	big := etcdschema.Flavor{ID: "2", Name: "big", VCPUs: 2, RAMMB: 1024}
	c.put(c.keys.CellInstance("cell1", "i1"), &etcdschema.Instance{UUID: "i1", Cell: "cell1", Host: "a",
		Status: etcdschema.StatusVerifyResize, Flavor: big})
	// The lost update: the info still has the old flavor.
	c.put(c.keys.HostInstance("a", "i1"), &etcdschema.InstanceInfo{UUID: "i1", Host: "a", FlavorID: small.ID,
		Flavor: small.Name, State: "active"})
	flavorOf := func() string {
		v, _ := c.hosts.view("a")
		if in := v.Instances["i1"]; in != nil {
			return in.FlavorID + "/" + in.Flavor
		}
		return ""
	}

	// An older agent's sync record: uuids only.
	rev := c.put(c.keys.HostSync("a"), &etcdschema.HostSync{Host: "a", UUIDs: []string{"i1"}})
	if err := c.hosts.WaitForRevision(c.ctx, rev); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "a trusted after the uuid-only sync", func() bool { return trusted(c, "a") })
	if got := flavorOf(); got != "1/small" {
		t.Fatalf("after a uuid-only sync the view has %q, want the info's 1/small (the seed's blind spot)", got)
	}

	// One sync as the agent now writes it: the record's flavor per uuid.
	c.put(c.keys.HostSync("a"), &etcdschema.HostSync{Host: "a", UUIDs: []string{"i1"}, FlavorIDs: []string{big.ID}})
	testwait.Equal(t, "the view corrected from the instance record", "2/big", flavorOf)
	testwait.Until(t, "a trusted again", func() bool { return trusted(c, "a") })
}
