// Package drain empties a compute host: Nomad's `node drain` and Nova's
// host-evacuate-live in one, kept server-side so it survives the CLI
// going away and the scheduler leader dying.
//
// Starting a drain (Store.Start, from the /v1 API and the console)
// disables the host first, with disabled_reason "draining", through the
// same synchronous disable as PUT /v1/services/{host} (hosts.Store.Update:
// the scheduler's ComputeFilter sees it at once, the agent confirms the
// trait), then writes the drain record (etcdschema.HostDrain under
// /drains/<host>) listing the host's servers as waiting.
//
// The scheduler leader's drain duty (Duty) does the rest, from the
// record alone: it moves the waiting servers off the host, at most
// Parallel at a time (cold: servers.Store.Move, a migrate to any host,
// then ConfirmResize once the migration is finished, since a drain's
// cold moves are confirmed by the drain; live: a LiveMigrator), follows
// each move through its migration record, and records moved, or failed
// with the migration's reason. Past the deadline it starts nothing more
// and ends incomplete; a cancel stops it starting moves; either way the
// moves already in flight are followed to their end (and confirmed), and
// the host stays disabled.
//
// Why a new leader can resume: every write of the duty is fenced by the
// term's election key and compares the record's revision, and every move
// it starts carries the drain's request id. The one step not atomic with
// the record is the move itself (servers.Store.Move writes the migration
// in its own transaction); a leader that dies between the move and the
// record leaves the server "waiting" in the record with a migration of
// the drain's request id, and the next leader adopts that migration
// instead of starting another (Move would refuse a second anyway: one
// move request per server). A deposed leader that has not noticed yet
// can start at most the moves of its last sweep; its record write is
// refused, and they are adopted the same way.
//
// A drain that ends (cancelled, past its deadline) inside such a window
// still adopts: the first look at an ended drain checks each server
// still waiting for a move of the drain's request id, follows it to its
// end (a cold one confirmed, never left in VERIFY_RESIZE) and gives the
// others up, with why and a finished_at, so it looks them up once. A
// deposed leader's move that lands after that look (a leader stalled
// past its lease mid-sweep) is the one case left: the cloud's
// api.resize_confirm_window, when set, confirms it.
package drain
