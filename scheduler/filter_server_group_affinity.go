package scheduler

import "github.com/berth-project/berth/etcdschema"

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

func (ServerGroupAffinityFilter) HostPasses(h *HostState, spec *RequestSpec, _ int) bool {
	g := spec.Group
	if g == nil || g.Policy() != etcdschema.PolicyAffinity {
		return true
	}
	hosts := g.Hosts()
	return len(hosts) == 0 || hosts[h.Host]
}
