package placement

import "go.etcd.io/etcd/api/v3/etcdserverpb"

// etcdResponseOp is one result of a transaction's operations.
type etcdResponseOp = etcdserverpb.ResponseOp
