package scheduler

import (
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

func TestServerGroupAntiAffinityFilter(t *testing.T) {
	withGroup := func(g *GroupInfo, instance string) *Cycle {
		c := newCycle(&RequestSpec{Flavor: flavorSpec("1", "f").Flavor, InstanceUUIDs: []string{instance}})
		c.Group = g
		return c
	}
	anti := func(max int, placed map[string][]string) *GroupInfo {
		return group(etcdschema.PolicyAntiAffinity, max, placed)
	}
	reported := hostWith(true, false, "m9") // an agent reports a member the records miss
	reported.Host = "h1"
	g9 := anti(0, nil)
	g9.Members["m9"] = true
	checkFilter(t, ServerGroupAntiAffinityFilter{}, []filterCase{
		{"no group passes", inAggs("h1"), flavorCycle("1", "f"), passes},
		{"empty host passes", inAggs("h1"), withGroup(anti(0, map[string][]string{"h2": {"m1"}}), "new"), passes},
		{"a member on the host fails (default max 1)", inAggs("h1"), withGroup(anti(0, map[string][]string{"h1": {"m1"}}), "new"), "holds 1 member(s) of anti-affinity group g (max_server_per_host 1)"},
		{"below max_server_per_host passes", inAggs("h1"), withGroup(anti(2, map[string][]string{"h1": {"m1"}}), "new"), passes},
		{"at max_server_per_host fails", inAggs("h1"), withGroup(anti(2, map[string][]string{"h1": {"m1", "m2"}}), "new"), "holds 2 member(s) of anti-affinity group g (max_server_per_host 2)"},
		{"a member the agent reports counts", reported, withGroup(g9, "new"), "holds 1 member(s) of anti-affinity group g (max_server_per_host 1)"},
		{"the instance already on the host passes", reported, withGroup(g9, "m9"), passes},
		{"the instance already placed there by an earlier try passes", inAggs("h1"),
			withGroup(anti(0, map[string][]string{"h1": {"again"}}), "again"), passes},
		{"affinity groups pass", inAggs("h1"), withGroup(group(etcdschema.PolicyAffinity, 0, map[string][]string{"h1": {"m1"}}), "new"), passes},
	})
}
