package scheduler

import (
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// agg builds an aggregate with metadata key=value pairs.
func agg(uuid string, kv ...string) *etcdschema.Aggregate {
	a := &etcdschema.Aggregate{UUID: uuid, Name: uuid, Metadata: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		a.Metadata[kv[i]] = kv[i+1]
	}
	return a
}

// inAggs is a host named name in the given aggregates.
func inAggs(name string, aggs ...*etcdschema.Aggregate) *HostState {
	h := hostWith(true, false)
	h.Host = name
	h.Aggregates = aggs
	h.AvailabilityZone = hostAvailabilityZone(aggs, "nova")
	return h
}

// withFlavorInstances is a host holding one instance per flavor id given.
func withFlavorInstances(flavorIDs ...string) *HostState {
	h := hostWith(true, false)
	for i, id := range flavorIDs {
		u := "i" + string(rune('a'+i))
		h.Instances[u] = &etcdschema.InstanceInfo{UUID: u, FlavorID: id}
	}
	return h
}

// withRes is a host with capacity and usage of one class.
func withRes(rc string, capacity, used int64) *HostState {
	h := hostWith(true, false)
	h.Resources = map[string]placement.ResourceSummary{rc: {Capacity: capacity, Used: used}}
	return h
}

// group is a GroupInfo with members placed on hosts (host -> members).
func group(policy string, maxPerHost int, placed map[string][]string, unplaced ...string) *GroupInfo {
	g := &GroupInfo{Group: &etcdschema.ServerGroup{UUID: "g", Policy: policy,
		Rules: etcdschema.ServerGroupRules{MaxServerPerHost: maxPerHost}},
		Members: map[string]bool{}, HostMembers: map[string]map[string]bool{}, slots: map[string]map[int]string{}}
	for h, ms := range placed {
		for _, m := range ms {
			g.place(h, m)
		}
	}
	for _, m := range unplaced {
		g.Members[m] = true
	}
	return g
}

// filterCase is one row of a filter's table: the reason the filter must
// give for turning the host down, or passes.
type filterCase struct {
	desc  string
	host  *HostState
	cycle *Cycle
	want  string
}

// passes is a filterCase's want for a host the filter lets through.
const passes = ""

// checkFilter runs a filter's table, asserting each refusal's reason.
func checkFilter(t *testing.T, f Filter, cases []filterCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			got := f.Filter(c.host, c.cycle)
			if got.Passed() != (c.want == passes) || got.Reason(c.host, c.cycle) != c.want {
				t.Fatalf("%s.Filter: passed %v, reason %q; want reason %q", f.Name(), got.Passed(), got.Reason(c.host, c.cycle), c.want)
			}
		})
	}
}

// flavorCycle is the cycle of a flavorSpec request, at its one instance.
func flavorCycle(id, name string, kv ...string) *Cycle {
	return newCycle(flavorSpec(id, name, kv...))
}

// flavorSpec is a request for a flavor with extra specs key=value pairs.
func flavorSpec(id, name string, kv ...string) *RequestSpec {
	f := etcdschema.Flavor{ID: id, Name: name, VCPUs: 1, RAMMB: 512, ExtraSpecs: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.ExtraSpecs[kv[i]] = kv[i+1]
	}
	return &RequestSpec{Flavor: f, InstanceUUIDs: []string{"new"}}
}

// put writes v under key and returns the revision.
func (c *cloud) put(key string, v etcdschema.Versioned) int64 {
	c.t.Helper()
	resp, err := c.cli.Put(c.ctx, key, etcdschema.MustEncode(v))
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.Header.Revision
}
