package rawtxn

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Compares, made once and not copied again. Each is a full range in
// etcd's apply (the key looked up, its value read and decoded), so a
// transaction carries only those its correctness needs.

//
// A message and the oneof wrapper(s) it points to are made as one
// allocation (the structs below; a pointer into a struct keeps all of it,
// and the parts live and die together anyway): a server booted puts,
// deletes and compares some 25 keys, and each was three or four
// allocations, now two with the key's bytes.

type createCmp struct {
	cmp pb.Compare
	u   pb.Compare_CreateRevision
}

func createRevisionIs(key string, result pb.Compare_CompareResult) *pb.Compare {
	c := &createCmp{cmp: pb.Compare{Key: []byte(key), Target: pb.Compare_CREATE, Result: result}}
	c.cmp.TargetUnion = &c.u
	return &c.cmp
}

// Absent holds when key does not exist (its create revision is 0).
func Absent(key string) *pb.Compare { return createRevisionIs(key, pb.Compare_EQUAL) }

// Present holds when key exists (its create revision is above 0).
func Present(key string) *pb.Compare { return createRevisionIs(key, pb.Compare_GREATER) }

type modCmp struct {
	cmp pb.Compare
	u   pb.Compare_ModRevision
}

// ModRevisionIs holds when key was last written at rev (0: it does not
// exist).
func ModRevisionIs(key string, rev int64) *pb.Compare {
	c := &modCmp{cmp: pb.Compare{Key: []byte(key), Target: pb.Compare_MOD, Result: pb.Compare_EQUAL},
		u: pb.Compare_ModRevision{ModRevision: rev}}
	c.cmp.TargetUnion = &c.u
	return &c.cmp
}

type leaseCmp struct {
	cmp pb.Compare
	u   pb.Compare_Lease
}

// LeaseIs holds when key is attached to lease (0: to none, or absent).
func LeaseIs(key string, lease int64) *pb.Compare {
	c := &leaseCmp{cmp: pb.Compare{Key: []byte(key), Target: pb.Compare_LEASE, Result: pb.Compare_EQUAL},
		u: pb.Compare_Lease{Lease: lease}}
	c.cmp.TargetUnion = &c.u
	return &c.cmp
}

// Operations.

// Put writes value at key.
func Put(key, value string) *pb.RequestOp { return PutBytes(key, []byte(value)) }

// PutBytes writes value at key, taking value as it is (Put copies its
// string): the caller hands it over and does not change it after.
func PutBytes(key string, value []byte) *pb.RequestOp {
	return putOp([]byte(key), value, 0)
}

// PutWithLease writes value at key attached to lease.
func PutWithLease(key, value string, lease int64) *pb.RequestOp {
	return putOp([]byte(key), []byte(value), lease)
}

// putParts is a put operation as one allocation (see the compares').
type putParts struct {
	op  pb.RequestOp
	u   pb.RequestOp_RequestPut
	put pb.PutRequest
}

func putOp(key, value []byte, lease int64) *pb.RequestOp {
	p := &putParts{}
	p.put.Key, p.put.Value, p.put.Lease = key, value, lease
	p.u.RequestPut = &p.put
	p.op.Request = &p.u
	return &p.op
}

// deleteParts is a delete operation as one allocation.
type deleteParts struct {
	op  pb.RequestOp
	u   pb.RequestOp_RequestDeleteRange
	del pb.DeleteRangeRequest
}

// Delete deletes key.
func Delete(key string) *pb.RequestOp {
	d := &deleteParts{del: pb.DeleteRangeRequest{Key: []byte(key)}}
	d.u.RequestDeleteRange = &d.del
	d.op.Request = &d.u
	return &d.op
}

// Get reads key.
func Get(key string) *pb.RequestOp {
	return Range(&pb.RangeRequest{Key: []byte(key)})
}

// Range reads as q says (a prefix, keys only, a count).
func Range(q *pb.RangeRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: q}}
}

// PrefixEnd is the range end that makes a range of key every key with
// key as its prefix (clientv3.GetPrefixRangeEnd).
func PrefixEnd(key string) []byte {
	end := []byte(key)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	// Every byte is 0xff: the range goes to the end of the key space.
	return []byte{0}
}

// Nested is r as an operation of another transaction: etcd evaluates its
// compares on their own and runs its Success or Failure alone.
func Nested(r *pb.TxnRequest) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: r}}
}
