package scheduler

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// TestTypeAffinityReadsUntrustedHosts runs TypeAffinityFilter with
// instance tracking off: b runs another flavor, known only from the cell's
// records, so every request must go to a.
func TestTypeAffinityReadsUntrustedHosts(t *testing.T) {
	c := newCloud(t)
	hm := NewHostManager(c.cli, c.keys, hclog.NewNullLogger(), WithTrackInstanceChanges(false))
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	go hm.Run(ctx)
	if err := hm.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	c.addHost("a", "cell1", 8, 8192, false)
	c.addHost("b", "cell1", 16, 16384, false) // more room: RAM alone would pick b
	c.put(c.keys.CellInstance("cell1", "x"), &etcdschema.Instance{UUID: "x", Host: "b", Status: etcdschema.StatusActive,
		Cell: "cell1", Flavor: etcdschema.Flavor{ID: "other", Name: "other"}})
	testwait.Until(t, "hosts seen", func() bool { _, ok := hm.view("b"); _, ok2 := hm.view("a"); return ok && ok2 })
	s, err := New(Config{MaxAttempts: 1, HostSubsetSize: 1, MaxPlacementResults: 1000,
		EnabledFilters: []string{"TypeAffinityFilter"}, Weights: map[string]float64{"ram": 1}}, c.place, hm, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		sp := spec(1, 256, "t"+string(rune('0'+i)))
		sels, err := s.SelectDestinations(c.ctx, sp)
		if err != nil {
			t.Fatal(err)
		}
		if sels[0][0].ServiceHost != "a" {
			t.Fatalf("flavor f placed on %s, which runs flavor other (read from the cell)", sels[0][0].ServiceHost)
		}
	}
}
