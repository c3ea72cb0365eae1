// Package workqueue is a leased work queue over an etcd prefix. Any
// number of processes (holders) run a Queue over the same prefix; each
// item is worked by one holder at a time, which holds a lease key created
// only when absent and bound to its session lease; when a holder dies its
// lease expires, the lease key vanishes and another holder takes the item.
// The superconductor (build requests) and the cell conductor (retries) in
// package conductor are its clients: a ProcessFunc ends an item by
// deleting its key and lease key in its own final transaction (FinishOps),
// guarded by StillHeld.
//
// # Holders and ranking
//
// Every holder sees every item. So that N holders do not all race for each
// one, holders register under a prefix of their own and rank each item's
// holders by rendezvous hashing: the first tries it at once, the others
// after a grace per rank and only while the better-ranked have leased
// nothing for an idle window; an idle second-ranked holder may steal the
// newer half of a live but slow holder's backlog. See ranking.go.
//
// # One record per item, one phase
//
// The queue keeps one record per item id (state.go). What the watches show
// of etcd is two facts on it, known (the item's key exists) and leased
// (its lease key exists, anyone's), which can change whatever this holder
// is doing. What this holder is doing is its phase:
//
//	pending    nothing of ours under way (maybe leased elsewhere, maybe gone)
//	waiting    another holder ranks first; we try it ourselves at record.due
//	queued     offered to our workers (work channel or overflow)
//	deferred   the Defer hook left it for another item's holder
//	in flight  our lease transaction is under way, or we hold it
//	finished   our final transaction deleted it; the watch has not shown it
//
// Each arrow is one method of Queue, which checks the phase it leaves:
//
//	                 wait                      offer (grace over, stolen)
//	+---------+ -----------> +---------+ --------------------> +--------+
//	|         | <----------- | waiting |                       |        |
//	|         |   retract    +---------+                       |        |
//	|         |                |     ^  wait (a new time)      |        |
//	|         |                '-----'                         |        |
//	|         | ------------------- offer -------------------> |        |
//	| pending | <------------- take, retract ----------------- | queued |
//	|         |                                                |        |
//	|         |      park    +----------+       offer          |        |
//	|         | -----------> | deferred | -------------------> |        |
//	|         | <----------- +----------+                      +--------+
//	|         |    retract        |  wait (to waiting)
//	|         |
//	|         |   fly (from pending, waiting, queued, deferred)
//	|         | ---------------------------------------------> +-----------+
//	|         | <------------------- land -------------------- | in flight |
//	|         |                                                +-----------+
//	|         |                                                      | finish
//	|         |                                                      v
//	|         | <------------------ forget ------------------- +-----------+
//	|         |                                                | finished  |
//	+---------+                                                +-----------+
//
// finish leaves the other phases too: a client that released an item (the
// superconductor's lost hand-off) may report it done after its lease key's
// deletion offered it again, and Done ends it wherever it stands.
//
// Who asks for them:
//
//	wait, offer  considerLocked (an item or lease event, the sweep, a woken
//	             deferral, a holder gone); offerDueLocked and stealLocked
//	             when a wait ends (ranking.go)
//	take, park   a worker taking an id off the work channel (dequeue)
//	retract      an item deleted or leased while waiting, queued or
//	             deferred; any item's deletion waking the deferred; a holder
//	             gone, so that we now rank first
//	fly          TryAcquire (the worker), TryAcquireMany (a client
//	             gathering a multi-instance request's siblings)
//	land         a lease transaction lost or failed; Release (of an item
//	             in flight; a second Release finds it elsewhere and
//	             leaves it)
//	finish       Done (a second Done finds it finished and leaves it)
//	forget       the item's deletion in the watch, the sweep, a re-listing
//
// A transition asked of a record in a phase it does not leave is a bug:
// it is refused, the record left as it was, and reported (logMisstep: an
// error in the log; a panic in test binaries, so that every test driving
// a queue fails at the faulty step). Entries the phases leave behind, an
// id on the work channel or in the delay heap, are not removed: whoever
// reads one checks the record's phase (and due time) and skips it when
// stale. A record goes (tidy) once it is pending and neither its item nor
// its lease key exists.
//
// # Files
//
// queue.go holds Config, New, Run, the session and the lease
// transactions (TryAcquire, TryAcquireMany, Release, Done, StillHeld);
// state.go the phases and transitions; offer.go the decisions that call
// them; ranking.go the ranking, grace, idle window and stealing; delay.go
// the heap of waiting items; watch.go the informer handlers.
package workqueue
