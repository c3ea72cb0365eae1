package scheduler

import (
	"strings"

	"github.com/berth-project/berth/etcdschema"
)

// ServerGroupAffinityFilter keeps the members of an affinity group on one
// host: a host passes when the group has no host yet or it is the group's.
// The claim's guard (groups.go) makes that hold against other schedulers.
type ServerGroupAffinityFilter struct{}

var _ Filter = ServerGroupAffinityFilter{}

func init() {
	registerFilter("ServerGroupAffinityFilter", func() Filter { return ServerGroupAffinityFilter{} })
}

func (ServerGroupAffinityFilter) Name() string { return "ServerGroupAffinityFilter" }

// RunOncePerRequest is false: the first pick gives the group its host.
func (ServerGroupAffinityFilter) RunOncePerRequest() bool { return false }

func (ServerGroupAffinityFilter) Filter(h *HostState, c *Cycle) Status {
	g := c.Group
	if g == nil || g.Policy() != etcdschema.PolicyAffinity {
		return pass
	}
	hosts := g.Hosts()
	if len(hosts) == 0 || hosts[h.Host] {
		return pass
	}
	return rejectWith(explainServerGroupAffinity)
}

func explainServerGroupAffinity(_ *HostState, c *Cycle) string {
	return "affinity group " + c.Group.Group.UUID + " is on " + strings.Join(sortedKeys(c.Group.Hosts()), ", ")
}
