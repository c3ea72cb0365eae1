package rawtxn

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Compares, made once and not copied again. Each is a full range in
// etcd's apply (the key looked up, its value read and decoded), so a
// transaction carries only those its correctness needs.

// Absent holds when key does not exist (its create revision is 0).
func Absent(key string) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL,
		TargetUnion: &pb.Compare_CreateRevision{}}
}

// Present holds when key exists (its create revision is above 0).
func Present(key string) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_CREATE, Result: pb.Compare_GREATER,
		TargetUnion: &pb.Compare_CreateRevision{}}
}

// ModRevisionIs holds when key was last written at rev (0: it does not
// exist).
func ModRevisionIs(key string, rev int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_MOD, Result: pb.Compare_EQUAL,
		TargetUnion: &pb.Compare_ModRevision{ModRevision: rev}}
}

// LeaseIs holds when key is attached to lease (0: to none, or absent).
func LeaseIs(key string, lease int64) *pb.Compare {
	return &pb.Compare{Key: []byte(key), Target: pb.Compare_LEASE, Result: pb.Compare_EQUAL,
		TargetUnion: &pb.Compare_Lease{Lease: lease}}
}

// Operations.

// Put writes value at key.
func Put(key, value string) *pb.RequestOp { return PutBytes(key, []byte(value)) }

// PutBytes writes value at key, taking value as it is (Put copies its
// string): the caller hands it over and does not change it after.
func PutBytes(key string, value []byte) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{
		Key: []byte(key), Value: value}}}
}

// PutWithLease writes value at key attached to lease.
func PutWithLease(key, value string, lease int64) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{
		Key: []byte(key), Value: []byte(value), Lease: lease}}}
}

// Delete deletes key.
func Delete(key string) *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{
		Key: []byte(key)}}}
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
