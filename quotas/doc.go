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
// Usage is counted from the records, never kept as a counter: there is
// no number to drift, to leak on a failed build or to repair. Count
// reads, at one etcd revision R, the project's instance mappings and for
// each its build request, instance record and Placement consumer: an
// instance counts until its delete is accepted (Nova's
// queued_for_delete); cores and RAM count a build request's flavor, else
// the consumer's VCPU and MEMORY_MB allocations (Nova's
// count_usage_from_placement: an ERROR server without allocations counts
// no cores), or the flavor while the instance is still in BUILD between
// a failed host and its next claim.
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
// The correctness argument is that usage only grows through a guarded
// create: every other change lowers it (a delete, a build that fails and
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
// Resize and other moves that grow an allocation are not guarded here.
package quotas
