package scheduler

import "github.com/berth-project/berth/etcdschema"

// The issue 4 filters and weighers that read a host's instances declare
// it, so hosts whose instance cache is not trusted have them read from
// the cells first (InstanceReader, instances.go).

// NeedsInstances: always; every instance's flavor counts.
func (TypeAffinityFilter) NeedsInstances(*Cycle) bool { return true }

// NeedsInstances: with an anti-affinity group, whose members on a host
// count the agent-reported ones too.
func (ServerGroupAntiAffinityFilter) NeedsInstances(c *Cycle) bool {
	return c.Group != nil && c.Group.Policy() == etcdschema.PolicyAntiAffinity
}

// NeedsInstances: with a soft-affinity group.
func (ServerGroupSoftAffinityWeigher) NeedsInstances(c *Cycle) bool {
	return c.Group != nil && c.Group.Policy() == etcdschema.PolicySoftAffinity
}

// NeedsInstances: with a soft-anti-affinity group.
func (ServerGroupSoftAntiAffinityWeigher) NeedsInstances(c *Cycle) bool {
	return c.Group != nil && c.Group.Policy() == etcdschema.PolicySoftAntiAffinity
}

var (
	_ InstanceReader = TypeAffinityFilter{}
	_ InstanceReader = ServerGroupAntiAffinityFilter{}
	_ InstanceReader = ServerGroupSoftAffinityWeigher{}
	_ InstanceReader = ServerGroupSoftAntiAffinityWeigher{}
)
