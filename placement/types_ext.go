package placement

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The contract in types.go is extended here (fields cannot be added to
// types.go's structs without editing it, so the extension is by new
// types and documented defaults).

// ClaimOptions tune one allocation write beyond AllocationWrite.
type ClaimOptions struct {
	// IgnoreConsumerGeneration skips the consumer generation check, as
	// Placement does before microversion 1.28 and for DELETE.
	IgnoreConsumerGeneration bool
	// Guards are conditions the write also needs, checked in the same
	// transaction (a leader's fence, "this consumer still has no instance
	// mapping", "the record is still the one I wrote"). When a guard fails
	// the write is not retried: it returns ErrGuardFailed.
	Guards []clientv3.Cmp
	// GuardOps are the caller's writes made together with the claim, only
	// when it succeeds: the scheduler takes a server group's place this
	// way, so a claim and the place it relies on are one atomic step.
	// They are etcd's messages (package rawtxn), as the claim's own
	// operations are, to be sent in the claim's transaction as built.
	GuardOps []*pb.RequestOp
}
