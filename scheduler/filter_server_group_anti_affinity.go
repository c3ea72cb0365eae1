package scheduler

import "github.com/berth-project/berth/etcdschema"

// ServerGroupAntiAffinityFilter keeps an anti-affinity group's members
// apart: a host passes while it holds fewer than the group's
// max_server_per_host members (default 1), or when it already holds the
// instance being placed. The claim's guard (groups.go) makes that hold
// against other schedulers.
type ServerGroupAntiAffinityFilter struct{}

var _ Filter = ServerGroupAntiAffinityFilter{}

func init() {
	registerFilter("ServerGroupAntiAffinityFilter", func() Filter { return ServerGroupAntiAffinityFilter{} })
}

func (ServerGroupAntiAffinityFilter) Name() string { return "ServerGroupAntiAffinityFilter" }

// RunOncePerRequest is false: each pick adds a member to a host.
func (ServerGroupAntiAffinityFilter) RunOncePerRequest() bool { return false }

func (ServerGroupAntiAffinityFilter) HostPasses(h *HostState, spec *RequestSpec, _ int) bool {
	g := spec.Group
	if g == nil || g.Policy() != etcdschema.PolicyAntiAffinity {
		return true
	}
	if spec.InstanceUUID != "" {
		// Already there: reported by the agent, or placed there by an
		// earlier try of this request whose hand-off never happened (it
		// keeps its slot on the host rather than taking another).
		if _, ok := h.Instances[spec.InstanceUUID]; ok || g.HostMembers[h.Host][spec.InstanceUUID] {
			return true
		}
	}
	return g.membersOn(h) < g.Group.MaxPerHost()
}
