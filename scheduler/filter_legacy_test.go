package scheduler

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/placement"
)

func TestLegacyResourceFilters(t *testing.T) {
	smallSpec := flavorSpec("1", "f") // 1 vCPU, 512 MB, no disk
	smallSpec.Flavor.DiskGB = 10
	small := newCycle(smallSpec)
	overridden := flavorCycle("1", "f", "resources:VCPU", "4")
	checkFilter(t, CoreFilter{}, []filterCase{
		{"room passes", withRes(placement.VCPU, 16, 15), small, passes},
		{"full fails", withRes(placement.VCPU, 16, 16), small, "VCPU: 0 free, 1 requested"},
		{"resources:VCPU overrides the flavor", withRes(placement.VCPU, 16, 13), overridden, "VCPU: 3 free, 4 requested"},
		{"no VCPU inventory passes", withRes(placement.MemoryMB, 1024, 0), small, passes},
	})
	checkFilter(t, RamFilter{}, []filterCase{
		{"room passes", withRes(placement.MemoryMB, 2048, 1536), small, passes},
		{"full fails", withRes(placement.MemoryMB, 2048, 1537), small, "RAM: 511 MB free, 512 MB requested"},
	})
	checkFilter(t, DiskFilter{}, []filterCase{
		{"room passes", withRes(placement.DiskGB, 100, 90), small, passes},
		{"full fails", withRes(placement.DiskGB, 100, 91), small, "disk: 9 GB free, 10 GB requested"},
	})
	// A passing host carries Nova's limit for the class; a failing one not.
	for _, c := range []struct {
		f        Filter
		rc, key  string
		total    int64
		used     int64
		want     int64
		wantPass bool
	}{
		{CoreFilter{}, placement.VCPU, "vcpu", 64, 3, 64, true},
		{RamFilter{}, placement.MemoryMB, "memory_mb", 2048, 100, 2048, true},
		{DiskFilter{}, placement.DiskGB, "disk_gb", 64, 64, 0, false},
	} {
		h := withRes(c.rc, c.total, c.used)
		if got := c.f.Filter(h, small).Passed(); got != c.wantPass {
			t.Fatalf("%s passed=%v, want %v", c.f.Name(), got, c.wantPass)
		}
		if got := h.Limits[c.key]; got != c.want {
			t.Errorf("%s set limit %s=%d, want %d", c.f.Name(), c.key, got, c.want)
		}
	}
	sel := (&Scheduler{}).selection(&HostState{Limits: map[string]int64{"vcpu": 64}}, placement.Candidate{})
	if sel.Limits["vcpu"] != int64(64) {
		t.Errorf("selection limits %v, want vcpu=64", sel.Limits)
	}
	for _, f := range []Filter{CoreFilter{}, RamFilter{}, DiskFilter{}} {
		if _, ok := f.(legacyFilter); !ok {
			t.Errorf("%s does not say placement enforces it", f.Name())
		}
	}
}

func TestLegacyFiltersSayPlacementEnforcesThemOnce(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn})
	cfg := DefaultConfig()
	cfg.EnabledFilters = []string{"ComputeFilter", "CoreFilter", "RamFilter"}
	s, err := New(cfg, nil, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"CoreFilter", "RamFilter"} {
		if n := strings.Count(buf.String(), "filter="+name); n != 1 {
			t.Errorf("%s logged %d times at start-up, want once:\n%s", name, n, buf.String())
		}
	}
	if strings.Contains(buf.String(), "ComputeFilter") {
		t.Errorf("ComputeFilter is not legacy:\n%s", buf.String())
	}
	// Filtering logs nothing more, however many hosts it sees.
	before := buf.Len()
	hosts := []*HostState{withRes(placement.VCPU, 4, 0), withRes(placement.VCPU, 4, 4)}
	runFilters(s.filters, hosts, flavorCycle("1", "f"))
	if buf.Len() != before {
		t.Errorf("filtering logged again: %s", buf.String()[before:])
	}
}
