package scheduler

import "github.com/berth-project/berth/etcdschema"

// ServerGroupSoftAffinityWeigher prefers hosts holding more members of the
// request's soft-affinity group; ServerGroupSoftAntiAffinityWeigher
// prefers hosts holding fewer members of its soft-anti-affinity group. Both
// weigh 0 for any other request, so they can stay enabled. Nova ships both
// at 1.0; a negative multiplier is refused by Nova's config (min 0).
type (
	ServerGroupSoftAffinityWeigher     struct{}
	ServerGroupSoftAntiAffinityWeigher struct{}
)

var (
	_ Weigher = ServerGroupSoftAffinityWeigher{}
	_ Weigher = ServerGroupSoftAntiAffinityWeigher{}
)

func init() {
	registerWeigher("soft_affinity", func() Weigher { return ServerGroupSoftAffinityWeigher{} })
	registerWeigher("soft_anti_affinity", func() Weigher { return ServerGroupSoftAntiAffinityWeigher{} })
}

func (ServerGroupSoftAffinityWeigher) Name() string { return "ServerGroupSoftAffinityWeigher" }

func (ServerGroupSoftAffinityWeigher) Weigh(h *HostState, c *Cycle) float64 {
	return membersWeight(h, c, etcdschema.PolicySoftAffinity)
}

func (ServerGroupSoftAntiAffinityWeigher) Name() string { return "ServerGroupSoftAntiAffinityWeigher" }

func (ServerGroupSoftAntiAffinityWeigher) Weigh(h *HostState, c *Cycle) float64 {
	return -membersWeight(h, c, etcdschema.PolicySoftAntiAffinity)
}

func (ServerGroupSoftAffinityWeigher) constantFor(c *Cycle) bool {
	return c.Group == nil || c.Group.Policy() != etcdschema.PolicySoftAffinity
}

func (ServerGroupSoftAntiAffinityWeigher) constantFor(c *Cycle) bool {
	return c.Group == nil || c.Group.Policy() != etcdschema.PolicySoftAntiAffinity
}

// membersWeight is the number of the group's members on h when the
// request's group has policy, else 0.
func membersWeight(h *HostState, c *Cycle, policy string) float64 {
	if c.Group == nil || c.Group.Policy() != policy {
		return 0
	}
	return float64(c.Group.membersOn(h))
}
