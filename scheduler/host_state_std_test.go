package scheduler

import (
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// The resource weighers read a joined host's VCPU, MEMORY_MB and DISK_GB
// from the copy placement's summary keeps of them (HostState.std): it
// must say what Resources says, for every class, before and after a pick
// consumes from the host.
func TestJoinedStandardResourcesMatchResources(t *testing.T) {
	ctx, ps, hm := benchIndexesWith(t, 12, 3)
	s, err := New(DefaultConfig(), ps, hm, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	c := newCycle(&RequestSpec{ProjectID: "p", UserID: "u", InstanceUUIDs: []string{"i-1"},
		Flavor: etcdschema.Flavor{Name: "m1.small", VCPUs: 2, RAMMB: 2048, DiskGB: 20}})
	defer c.release()
	q, aggs, err := s.query(c)
	if err != nil {
		t.Fatal(err)
	}
	cands, err := s.candidates(ctx, c, q, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := s.hostStates(ctx, c, cands, aggs)
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 12 {
		t.Fatalf("joined %d hosts, want 12", len(hosts))
	}
	check := func(when string, h *HostState) {
		t.Helper()
		if !h.stdOK {
			t.Fatalf("%s %s: no standard classes from placement's summary", when, h.Host)
		}
		for _, rc := range []string{placement.VCPU, placement.MemoryMB, placement.DiskGB, "CUSTOM_X"} {
			r := h.resourceMap()[rc]
			if got, want := h.Free(rc), r.Capacity-r.Used; got != want {
				t.Errorf("%s %s: Free(%s) = %d, Resources say %d", when, h.Host, rc, got, want)
			}
			if got, want := h.Total(rc), r.Capacity; got != want {
				t.Errorf("%s %s: Total(%s) = %d, Resources say %d", when, h.Host, rc, got, want)
			}
		}
	}
	for _, h := range hosts {
		check("joined", h)
		if h.Free(placement.VCPU) != 64-3 {
			t.Errorf("%s: %d VCPU free, want 61 (64 less 3 instances)", h.Host, h.Free(placement.VCPU))
		}
		h.consume(h.Candidates[0])
		check("after a pick", h)
		if h.Free(placement.VCPU) != 64-3-2 {
			t.Errorf("%s: %d VCPU free after a pick of 2, want 59", h.Host, h.Free(placement.VCPU))
		}
	}
	// A state built by hand (the fallback's, the tests') reads Resources.
	h := &HostState{Host: "x", Resources: map[string]placement.ResourceSummary{placement.VCPU: {Capacity: 8, Used: 3}}}
	if got := h.Free(placement.VCPU); got != 5 {
		t.Errorf("hand-built state: Free(VCPU) = %d, want 5", got)
	}
}
