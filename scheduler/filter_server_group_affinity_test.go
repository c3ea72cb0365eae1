package scheduler

import (
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

func TestServerGroupAffinityFilter(t *testing.T) {
	withGroup := func(g *GroupInfo) *Cycle {
		c := flavorCycle("1", "f")
		c.Group = g
		return c
	}
	h1 := inAggs("h1")
	checkFilter(t, ServerGroupAffinityFilter{}, []filterCase{
		{"no group passes", h1, flavorCycle("1", "f"), passes},
		{"group with no host yet passes", h1, withGroup(group(etcdschema.PolicyAffinity, 0, nil, "m1")), passes},
		{"the group's host passes", h1, withGroup(group(etcdschema.PolicyAffinity, 0, map[string][]string{"h1": {"m1"}})), passes},
		{"another host fails", h1, withGroup(group(etcdschema.PolicyAffinity, 0, map[string][]string{"h2": {"m1"}})), "affinity group g is on h2"},
		{"other policies pass", h1, withGroup(group(etcdschema.PolicyAntiAffinity, 0, map[string][]string{"h2": {"m1"}})), passes},
		{"soft-affinity is the weigher's job", h1, withGroup(group(etcdschema.PolicySoftAffinity, 0, map[string][]string{"h2": {"m1"}})), passes},
	})
}
