package scheduler

import (
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

func TestServerGroupAffinityFilter(t *testing.T) {
	withGroup := func(g *GroupInfo) *RequestSpec {
		s := flavorSpec("1", "f")
		s.Group = g
		return s
	}
	h1 := inAggs("h1")
	checkFilter(t, ServerGroupAffinityFilter{}, []filterCase{
		{"no group passes", h1, flavorSpec("1", "f"), true},
		{"group with no host yet passes", h1, withGroup(group(etcdschema.PolicyAffinity, 0, nil, "m1")), true},
		{"the group's host passes", h1, withGroup(group(etcdschema.PolicyAffinity, 0, map[string][]string{"h1": {"m1"}})), true},
		{"another host fails", h1, withGroup(group(etcdschema.PolicyAffinity, 0, map[string][]string{"h2": {"m1"}})), false},
		{"other policies pass", h1, withGroup(group(etcdschema.PolicyAntiAffinity, 0, map[string][]string{"h2": {"m1"}})), true},
		{"soft-affinity is the weigher's job", h1, withGroup(group(etcdschema.PolicySoftAffinity, 0, map[string][]string{"h2": {"m1"}})), true},
	})
}
