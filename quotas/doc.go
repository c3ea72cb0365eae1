// Package quotas is Nova's quotas for a project (instances, cores, ram,
// server_groups, server_group_members and the limits Nova shows beside
// them), kept in etcd and enforced race-free.
//
// # Limits
//
// A project's limits are the configured defaults (the API's quota block,
// Nova's defaults when absent) overlaid with what os-quota-sets set for
// it (etcdschema.QuotaSet; per-user limits inside it).
//
// # Counting
//
// Usage is counted from the records: Count reads, at one etcd revision R, the project's instance mappings and for
// each its build request, instance record and Placement consumer: an
// instance counts until its delete is accepted (Nova's
// queued_for_delete); cores and RAM count a build request's flavor, else
// the consumer's VCPU and MEMORY_MB allocations (Nova's
// count_usage_from_placement: an ERROR server without allocations counts
// no cores), or the flavor while the instance is still in BUILD between
// a failed host and its next claim.
//
// The project's servers are found through a per-project index
// (etcdschema QuotaInstance keys, written and deleted in the transactions
// that write and delete the servers' mappings), so a count reads the
// project's own records, not every mapping of the deployment (index.go).
// A deployment upgraded from a Berth without it is counted from every
// mapping until the leader's quota_index duty has built it (BuildIndex,
// idempotent, fenced); a project an older Berth still creates in is
// counted that way until the next build.
//
// # The usage record
//
// A count reads every server of the project, so a check that counted
// would grow with the project (6-7 ms at 100 servers). The fence key
// therefore carries a usage record (etcdschema.QuotaFence.Usage) that
// is at least what a count would find for as long as the fence does
// not move: every guarded write adds its charge to it (a create's
// servers, a group, a move's hold), and nothing that lowers the usage
// touches it. A check that fits the record is answered from it in O(1),
// with the count's answer; one that does not counts as before, answers
// from the count (every refusal and every range cut to the room comes
// from a count, in Nova's figures) and resets the record to the count.
// The record only drifts up, which costs a count near a limit, never a
// create past one. Per-user limits, the limits API and os-quota-sets'
// in_use still count. record.go has the argument, audit.go the check
// that a record is never below the count (AuditUsage) and its repair.
//
// # Creates checked together
//
// The creates ready together in one API process are stored in one etcd
// request (servers' create batches); PlanServers plans each project's
// share of it: the creates that fit the usage record, checked one after
// another as if each earlier one were stored, under one comparison of
// the fence and the quota set and one fence write carrying the record
// plus all their charges. A create whose own comparisons fail leaves its
// charge in the record, which an upper bound allows. The plans remember
// each project's set and fence as their last share wrote them (or as a
// failed share's Else read them), so a create reads nothing; a stale
// memory costs one failed share. What needs a count goes alone
// (ReserveServers). batch.go has the argument.
//
// # Enforcing without a race
//
// Nova checks, creates, then re-checks after the fact, so two API
// workers can both take a project's last core. Here the check is part
// of the transaction that stores the create: ReserveServers counts at R
// and returns a Guard, If(ModRevision(QuotaFence(project)) <= R) and
// Put(QuotaFence(project)), that the create's own transaction (the build
// requests and mappings, or the server group) carries. Of two creates
// that counted the same usage, the first to commit moves the fence and
// the second's comparison fails; it counts again, now seeing the first.
// A check answered from the usage record compares the fence's mod
// revision it read instead (ModRevision == M), with the same effect.
// The correctness argument is that usage only grows through a guarded
// create or move start: every other change lowers it (a delete, a build that fails and
// frees its claim) or moves it between two forms counted alike at R (a
// claim turns a build request's flavor into an allocation of the same
// resources; the superconductor turns a build request into an instance
// in BUILD). A lowered usage seen late only refuses conservatively.
// Group members come from any project's creates, so a create into a
// group also compares that no member key was created after R.
//
// A create that needs more than one transaction (over 62 servers, 41 in
// a group) checks the whole request before the first and counts again
// before each next part; under contention at the limit a later part can
// be refused after the first was stored (the limit still holds).
//
// A user whose instances, cores or ram os-quota-sets set (user_id) is
// also checked against what the user owns (the build requests' and
// instances' user), in the same count and under the same fence, as Nova
// checks per-user quotas; its refusals quote what Nova quotes.
//
// # Moves
//
// A server with a move in flight (resize or cold migration) also counts
// its migration's consumer (the source, Nova's migration-based
// allocations), so source and destination both count as in Nova's
// placement counting; while the move is pre-migrating it counts at least
// its old and new flavors together, whichever step of the hand-over
// (source to the migration, then the destination's claim) it reached.
// ReserveMove is Nova's _check_quota_for_upsize: the cores and ram
// deltas (positive parts only) against the project's and the user's
// limits, words quoting the user's usage, under the same fence as
// creates; the API calls it for a resize and for a revert (the way back
// of a resize down). As in Nova, a move in flight counts both flavors,
// so an upsize checked at the limit may show the project over it until
// the move is confirmed or reverted, and a revert of a downsize counts
// the old flavor twice. Every move start (resize, cold migration,
// evacuation, live migration) writes the fence with its hold added to
// the usage record, checked or not: the count grows by the new flavor
// (the flavor, for an evacuation or a live migration once its
// destination is claimed) while the move is in flight.
//
// # Shelving
//
// A shelved server keeps its allocation; an offloaded one holds none but
// counts its flavor's cores and ram, as Nova's default counting (from
// the database) does, so an offload frees no quota a create could take
// before the unshelve, and an unshelve (max of its claim and its
// flavor) never grows usage and needs no check.
package quotas
