package scheduler

import (
	"fmt"

	"github.com/berth-project/berth/etcdschema"
)

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

func (ServerGroupAntiAffinityFilter) Filter(h *HostState, c *Cycle) Status {
	g := c.Group
	if g == nil || g.Policy() != etcdschema.PolicyAntiAffinity {
		return pass
	}
	if c.Instance != "" {
		// Already there: reported by the agent, or placed there by an
		// earlier try of this request whose hand-off never happened (it
		// keeps its slot on the host rather than taking another).
		if _, ok := h.Instances[c.Instance]; ok || g.HostMembers[h.Host][c.Instance] {
			return pass
		}
	}
	if g.membersOn(h) >= g.Group.MaxPerHost() {
		return rejectWith(explainServerGroupAntiAffinity)
	}
	return pass
}

func explainServerGroupAntiAffinity(h *HostState, c *Cycle) string {
	g := c.Group
	return fmt.Sprintf("holds %d member(s) of anti-affinity group %s (max_server_per_host %d)",
		g.membersOn(h), g.Group.UUID, g.Group.MaxPerHost())
}
