// Package rawtxn sends etcd transactions built directly as etcdserverpb
// messages: a *pb.TxnRequest whose *pb.Compare and *pb.RequestOp values
// are made once by the caller and handed to etcd as they are.
//
// Why: clientv3 (v3.7.3) copies every compare with proto.Clone, by
// reflection, once in Compare, again in Txn.If, again in OpTxn and again
// when a nested Op becomes a request (compare.go, txn.go, op.go), and
// turns every Op into a fresh RequestOp at Then. In the 10,000-host boot
// profile proto.Clone was 0.61 s of 12.54 s (4.9%), and its reflection
// grew goroutine stacks (runtime.newstack 0.49 s, 0.22 s of it under
// reflect's resolveTypeOff); in a host agent's provider tick it was most
// of the ~0.8 ms of client-side CPU per tick, which is what bounded the
// 100,000-host run with agents. A transaction built here costs its
// messages and nothing else.
//
// Sending keeps clientv3's semantics: the request goes through the same
// pb.KVClient a client's KV sends through (clientv3.RetryKVClient for a
// networked client, which never retries a Txn; the in-process adapter
// for the embedded member's client), with the same call options, and
// errors pass through clientv3.ContextError. Berth's KV wrappers (the
// embedded member's identity and close gate, the request tally, the
// latency metrics) each implement Sender, doing what they do for a
// clientv3.Txn's Commit; a KV that does not (a test's fault injector)
// gets the transaction through its clientv3.Txn instead, converted
// field for field, so nothing is ever sent around a wrapper.
//
// The hot transactions (the agent's provider tick and build outcome, the
// API's batched creates, the work queue's leases, the superconductor's
// hand-offs, Placement's claims, txnbatch's nested transactions) are
// built here; rare ones stay
// on clientv3's builders, which remain correct, only slower.
package rawtxn
