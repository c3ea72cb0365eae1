// Package conductor runs the work that moves a server from request to host:
// the superconductor, which leases BuildRequests, asks a scheduler for
// destinations and hands each instance to its cell and host in one etcd
// transaction (seed cells-scheduling-interaction); and the cell conductor,
// which leases reschedule work items inside one cell and retries a failed
// build on the next stored alternate without asking the scheduler again
// (seed return-alternate-hosts). The superconductor also leases
// MoveRequests (moves.go): a resize or cold migration hands the source's
// allocation to its migration's consumer, is scheduled with the new
// flavor in the instance's cell and cast to the destination; a failed
// destination is retried by the cell conductor on the migration's stored
// alternates (cell_moves.go), as a build is. An evacuation (evacuate.go)
// is a MoveRequest of its own kind: scheduled ignoring the down source,
// its rebuild retried on the alternates by the cell conductor, which
// also frees the source's allocation once the rebuild is done. The
// unshelve of an offloaded server is a MoveRequest of kind unshelve
// (unshelve.go, no migration): scheduled with its flavor, group, zone and
// requested host, its alternates kept on the instance, a failed spawn
// retried on them by the cell conductor. All are clients of
// internal/workqueue, a
// leased work queue, so a process killed between any two steps leaves
// work another finishes.
package conductor
