package quotas

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// seedPlacedOps are the records of one ACTIVE server of project in
// cell1 holding flavor's VCPU and MEMORY_MB, as written before the
// per-project index existed (an older Berth's create and claim).
func seedPlacedOps(keys etcdschema.Keys, uuid, project string, flavor etcdschema.Flavor) []clientv3.Op {
	m := &etcdschema.InstanceMapping{InstanceUUID: uuid, ProjectID: project, Cell: "cell1"}
	in := &etcdschema.Instance{UUID: uuid, Name: "s-" + uuid, Status: etcdschema.StatusActive, Cell: "cell1",
		Host: "compute-1", Node: "compute-1", Flavor: flavor.Embedded(), ProjectID: project, UserID: "u"}
	c := &etcdschema.Consumer{UUID: uuid, ProjectID: project, UserID: "u", Allocations: map[string]etcdschema.ConsumerAllocation{
		"rp-1": {Resources: map[string]int64{"VCPU": int64(flavor.VCPUs), "MEMORY_MB": int64(flavor.RAMMB)}}}}
	return []clientv3.Op{
		clientv3.OpPut(keys.InstanceMapping(uuid), etcdschema.MustEncode(m)),
		clientv3.OpPut(keys.CellInstance("cell1", uuid), etcdschema.MustEncode(in)),
		clientv3.OpPut(keys.Consumer(uuid), etcdschema.MustEncode(c)),
	}
}
