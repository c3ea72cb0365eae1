package rawtxn

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// commitViaClientv3 sends r through kv's clientv3.Txn, for a KV that is
// not a Sender: every field of r as clientv3's options spell it.
func commitViaClientv3(ctx context.Context, kv clientv3.KV, r *pb.TxnRequest) (*clientv3.TxnResponse, error) {
	cmps, then, els, err := clientv3Parts(r)
	if err != nil {
		return nil, err
	}
	txn := kv.Txn(ctx)
	if len(cmps) > 0 {
		txn = txn.If(cmps...)
	}
	if len(then) > 0 {
		txn = txn.Then(then...)
	}
	if len(els) > 0 {
		txn = txn.Else(els...)
	}
	return txn.Commit()
}

func clientv3Parts(r *pb.TxnRequest) (cmps []clientv3.Cmp, then, els []clientv3.Op, err error) {
	cmps = make([]clientv3.Cmp, len(r.Compare))
	for i, c := range r.Compare {
		cmps[i] = clientv3.FromCompare(c)
	}
	if then, err = clientv3Ops(r.Success); err != nil {
		return nil, nil, nil, err
	}
	if els, err = clientv3Ops(r.Failure); err != nil {
		return nil, nil, nil, err
	}
	return cmps, then, els, nil
}

func clientv3Ops(reqs []*pb.RequestOp) ([]clientv3.Op, error) {
	ops := make([]clientv3.Op, len(reqs))
	for i, req := range reqs {
		op, err := clientv3Op(req)
		if err != nil {
			return nil, err
		}
		ops[i] = op
	}
	return ops, nil
}

// clientv3Op is req as a clientv3.Op whose request (clientv3's
// toRequestOp) is req again.
func clientv3Op(req *pb.RequestOp) (clientv3.Op, error) {
	switch v := req.GetRequest().(type) {
	case *pb.RequestOp_RequestRange:
		q := v.RequestRange
		var opts []clientv3.OpOption
		if len(q.RangeEnd) > 0 {
			opts = append(opts, clientv3.WithRange(string(q.RangeEnd)))
		}
		if q.Limit != 0 {
			opts = append(opts, clientv3.WithLimit(q.Limit))
		}
		if q.Revision != 0 {
			opts = append(opts, clientv3.WithRev(q.Revision))
		}
		if q.SortOrder != pb.RangeRequest_NONE || q.SortTarget != pb.RangeRequest_KEY {
			opts = append(opts, clientv3.WithSort(clientv3.SortTarget(q.SortTarget), clientv3.SortOrder(q.SortOrder)))
		}
		if q.Serializable {
			opts = append(opts, clientv3.WithSerializable())
		}
		if q.KeysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		if q.CountOnly {
			opts = append(opts, clientv3.WithCountOnly())
		}
		if q.MinModRevision != 0 {
			opts = append(opts, clientv3.WithMinModRev(q.MinModRevision))
		}
		if q.MaxModRevision != 0 {
			opts = append(opts, clientv3.WithMaxModRev(q.MaxModRevision))
		}
		if q.MinCreateRevision != 0 {
			opts = append(opts, clientv3.WithMinCreateRev(q.MinCreateRevision))
		}
		if q.MaxCreateRevision != 0 {
			opts = append(opts, clientv3.WithMaxCreateRev(q.MaxCreateRevision))
		}
		return clientv3.OpGet(string(q.Key), opts...), nil
	case *pb.RequestOp_RequestPut:
		p := v.RequestPut
		var opts []clientv3.OpOption
		if p.Lease != 0 {
			opts = append(opts, clientv3.WithLease(clientv3.LeaseID(p.Lease)))
		}
		if p.PrevKv {
			opts = append(opts, clientv3.WithPrevKV())
		}
		if p.IgnoreValue {
			opts = append(opts, clientv3.WithIgnoreValue())
		}
		if p.IgnoreLease {
			opts = append(opts, clientv3.WithIgnoreLease())
		}
		return clientv3.OpPut(string(p.Key), string(p.Value), opts...), nil
	case *pb.RequestOp_RequestDeleteRange:
		d := v.RequestDeleteRange
		var opts []clientv3.OpOption
		if len(d.RangeEnd) > 0 {
			opts = append(opts, clientv3.WithRange(string(d.RangeEnd)))
		}
		if d.PrevKv {
			opts = append(opts, clientv3.WithPrevKV())
		}
		return clientv3.OpDelete(string(d.Key), opts...), nil
	case *pb.RequestOp_RequestTxn:
		cmps, then, els, err := clientv3Parts(v.RequestTxn)
		if err != nil {
			return clientv3.Op{}, err
		}
		return clientv3.OpTxn(cmps, then, els), nil
	default:
		return clientv3.Op{}, fmt.Errorf("rawtxn: a transaction operation of no known kind (%T)", v)
	}
}
