package placement

import (
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdResponseOp is one result of a transaction's operations.
type etcdResponseOp = etcdserverpb.ResponseOp

// modRevisionIs is clientv3.Compare(clientv3.ModRevision(key), "=", rev)
// without its deep copy: Compare clones its argument with proto.Clone
// (reflection, a copy of the key) before setting the result and target,
// though ModRevision has just made it and nobody else holds it. A claim
// makes one per record it planned from.
func modRevisionIs(key string, rev int64) clientv3.Cmp {
	cmp := clientv3.ModRevision(key)
	c := cmp.GetCompare()
	c.Result = etcdserverpb.Compare_EQUAL
	c.TargetUnion = &etcdserverpb.Compare_ModRevision{ModRevision: rev}
	return cmp
}
