package placement

import (
	clientv3 "go.etcd.io/etcd/client/v3"
)

type clientv3Op = clientv3.Op

func opPut(k, v string) clientv3.Op { return clientv3.OpPut(k, v) }
