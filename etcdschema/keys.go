// Package etcdschema is the one place that spells Berth's etcd keys and owns
// the JSON value types stored under them. No other package formats a key by
// hand: they ask a Keys value for it, so the layout can change in one place
// and docs/etcd-keys.md can be checked against it.
package etcdschema

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultPrefix is where Berth keeps everything when config says nothing.
const DefaultPrefix = "/berth"

// Keys builds and parses keys under one deployment's prefix.
type Keys struct {
	prefix string
}

// New returns the key builder for prefix ("" means DefaultPrefix). The
// prefix is normalised to start with "/" and not end with one.
func New(prefix string) Keys {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}
	return Keys{prefix: strings.TrimRight(prefix, "/")}
}

// Prefix is the deployment's root, e.g. "/berth".
func (k Keys) Prefix() string { return k.prefix }

// All is the prefix that holds every Berth key (for dumps and wipes).
func (k Keys) All() string { return k.prefix + "/" }

// join builds prefix/part/part... in one allocation: keys are made on
// every claim (its consumer and provider) and every host write. A part
// that is not a clean segment (segment.go) is escaped, so no argument can
// add a level to the key, name its parent, or hide a control character.
func (k Keys) join(parts ...string) string {
	if len(parts) == 0 {
		return k.prefix + "/"
	}
	for _, p := range parts {
		if !cleanSegment(p) {
			return k.joinEscaped(parts)
		}
	}
	return k.concat(parts)
}

// concat spells prefix/part/part... with parts as they are.
func (k Keys) concat(parts []string) string {
	n := len(k.prefix) + len(parts)
	for _, p := range parts {
		n += len(p)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(k.prefix)
	for _, p := range parts {
		b.WriteByte('/')
		b.WriteString(p)
	}
	return b.String()
}

// joinEscaped is join's slow path, for parts of which one at least is not
// clean: only a caller that skipped its boundary check gets here.
func (k Keys) joinEscaped(parts []string) string {
	escaped := make([]string, len(parts))
	for i, p := range parts {
		if cleanSegment(p) {
			escaped[i] = p
		} else {
			escaped[i] = escapeSegment(p)
		}
	}
	return k.concat(escaped)
}

// ---- placement -------------------------------------------------------------

// Provider is the record of one resource provider: its tree position,
// inventories, traits, aggregates and usages, with its generation.
func (k Keys) Provider(uuid string) string { return k.join("placement", "providers", uuid) }

// Providers is the prefix of every provider record.
func (k Keys) Providers() string { return k.join("placement", "providers") + "/" }

// ProviderName reserves a provider name (value: the provider's uuid).
func (k Keys) ProviderName(name string) string { return k.join("placement", "names", name) }

// ProviderNames is the prefix of every name reservation.
func (k Keys) ProviderNames() string { return k.join("placement", "names") + "/" }

// Consumer is one consumer's allocations and generation.
func (k Keys) Consumer(uuid string) string { return k.join("placement", "consumers", uuid) }

// Consumers is the prefix of every consumer record.
func (k Keys) Consumers() string { return k.join("placement", "consumers") + "/" }

// CustomTrait records a CUSTOM_* trait that was created.
func (k Keys) CustomTrait(name string) string { return k.join("placement", "traits", name) }

// CustomTraits is the prefix of every custom trait.
func (k Keys) CustomTraits() string { return k.join("placement", "traits") + "/" }

// CustomResourceClass records a CUSTOM_* resource class that was created.
func (k Keys) CustomResourceClass(name string) string {
	return k.join("placement", "classes", name)
}

// CustomResourceClasses is the prefix of every custom resource class.
func (k Keys) CustomResourceClasses() string { return k.join("placement", "classes") + "/" }

// ---- hosts -----------------------------------------------------------------

// HostsPrefix holds every per-host key.
func (k Keys) HostsPrefix() string { return k.join("hosts") + "/" }

// HostPrefix holds one host's keys.
func (k Keys) HostPrefix(host string) string { return k.join("hosts", host) + "/" }

// Service is the host's service record.
func (k Keys) Service(host string) string { return k.join("hosts", host, "service") }

// Alive is bound to the agent's lease: when it is gone, the host is down.
func (k Keys) Alive(host string) string { return k.join("hosts", host, "alive") }

// HostInstance is the instance info an agent reports for the scheduler.
func (k Keys) HostInstance(host, uuid string) string {
	return k.join("hosts", host, "instances", uuid)
}

// HostInstances is the prefix of one host's instance info.
func (k Keys) HostInstances(host string) string { return k.join("hosts", host, "instances") + "/" }

// HostInstancesToService is the key range [from, end) of one host's
// instance info and its service record, which sort next to each other
// under the host's prefix (alive < builds/ < capacity < down <
// instances/ < service < sync): what an agent follows on one watcher.
func (k Keys) HostInstancesToService(host string) (from, end string) {
	return k.HostInstances(host), k.Service(host) + "\x00"
}

// HostSync is the agent's periodic list of its instance uuids.
func (k Keys) HostSync(host string) string { return k.join("hosts", host, "sync") }

// HostCapacity is the agent's report of its host's inventories and usage
// outside Placement (Nova's compute node record), which the scheduler's
// empty-Placement fallback filters on.
func (k Keys) HostCapacity(host string) string { return k.join("hosts", host, "capacity") }

// HostDown is the leader's record that a host is down (its alive key is
// gone), with when it was first seen down; deleted when it is back.
func (k Keys) HostDown(host string) string { return k.join("hosts", host, "down") }

// HostDrain is an operator's drain of a host and its progress, kept
// outside /hosts/ so its frequent updates do not wake every host
// manager's watch.
func (k Keys) HostDrain(host string) string { return k.join("drains", host) }

// HostDrains is the prefix the leader's drain duty watches.
func (k Keys) HostDrains() string { return k.join("drains") + "/" }

// Build is a build or delete cast to a host.
func (k Keys) Build(host, uuid string) string { return k.join("hosts", host, "builds", uuid) }

// Builds is the prefix an agent watches for work.
func (k Keys) Builds(host string) string { return k.join("hosts", host, "builds") + "/" }

// ---- API level -------------------------------------------------------------

// Flavor is a flavor record, by name.
func (k Keys) Flavor(name string) string { return k.join("flavors", name) }

// Flavors is the prefix of every flavor.
func (k Keys) Flavors() string { return k.join("flavors") + "/" }

// BuildRequest is a requested server before a cell is chosen.
func (k Keys) BuildRequest(uuid string) string { return k.join("build_requests", uuid) }

// BuildRequests is the prefix superconductors watch.
func (k Keys) BuildRequests() string { return k.join("build_requests") + "/" }

// BuildRequestHolder registers one running superconductor queue (id: its
// session lease in hex), bound to that lease: superconductors spread the
// build requests over the holders registered here.
func (k Keys) BuildRequestHolder(id string) string { return k.join("holders", "build_requests", id) }

// BuildRequestHolders is the prefix of the superconductor queue holders.
func (k Keys) BuildRequestHolders() string { return k.join("holders", "build_requests") + "/" }

// BuildRequestLease marks the superconductor working on a BuildRequest; it
// is bound to that superconductor's lease.
func (k Keys) BuildRequestLease(uuid string) string { return k.join("leases", "build_requests", uuid) }

// InstanceMapping says which cell holds an instance (empty until scheduled).
func (k Keys) InstanceMapping(uuid string) string { return k.join("instance_mappings", uuid) }

// InstanceMappings is the prefix of every instance mapping.
func (k Keys) InstanceMappings() string { return k.join("instance_mappings") + "/" }

// Alternates is the remaining Selection list for an instance.
func (k Keys) Alternates(uuid string) string { return k.join("alternates", uuid) }

// AlternatesPrefix is the prefix of every alternates list.
func (k Keys) AlternatesPrefix() string { return k.join("alternates") + "/" }

// ---- images ----------------------------------------------------------------

// Image is an image of the image service, by its id (a UUID).
func (k Keys) Image(id string) string { return k.join("images", id) }

// Images is the prefix of every image.
func (k Keys) Images() string { return k.join("images") + "/" }

// ---- server groups and aggregates ------------------------------------------

// ServerGroup is a server group record (policy, rules, owner).
func (k Keys) ServerGroup(uuid string) string { return k.join("server_groups", uuid) }

// ServerGroups is the prefix of every server group record and its
// sub-keys; group records are the keys directly under it.
func (k Keys) ServerGroups() string { return k.join("server_groups") + "/" }

// ServerGroupPrefix holds one group's members and placement guards (not the
// group record itself, which is ServerGroup(uuid)).
func (k Keys) ServerGroupPrefix(uuid string) string { return k.join("server_groups", uuid) + "/" }

// ServerGroupMember records that an instance belongs to a group, and once
// scheduled, on which host it was placed.
func (k Keys) ServerGroupMember(group, instance string) string {
	return k.join("server_groups", group, "members", instance)
}

// ServerGroupMembers is the prefix of one group's members.
func (k Keys) ServerGroupMembers(group string) string {
	return k.join("server_groups", group, "members") + "/"
}

// ServerGroupSlot is one of the max_server_per_host places an
// anti-affinity group has on a host; a claim creates it only if absent.
func (k Keys) ServerGroupSlot(group, host string, slot int) string {
	return k.serverGroupSlot(group, host, strconv.Itoa(slot))
}

// serverGroupSlot spells ServerGroupSlot with the slot as a string, so
// ParseKey can build its pattern from the same code.
func (k Keys) serverGroupSlot(group, host, slot string) string {
	return k.join("server_groups", group, "slots", host, slot)
}

// ServerGroupSlots is the prefix of one group's slots on every host.
func (k Keys) ServerGroupSlots(group string) string {
	return k.join("server_groups", group, "slots") + "/"
}

// ServerGroupAffinityHost is the one host an affinity group lives on,
// created by the claim that places its first member.
func (k Keys) ServerGroupAffinityHost(group string) string {
	return k.join("server_groups", group, "affinity_host")
}

// Aggregate is a host aggregate record (Nova's aggregates table row with its
// hosts and metadata).
func (k Keys) Aggregate(uuid string) string { return k.join("aggregates", uuid) }

// Aggregates is the prefix of every aggregate record.
func (k Keys) Aggregates() string { return k.join("aggregates") + "/" }

// AggregateName reserves an aggregate name (value: the aggregate's uuid).
func (k Keys) AggregateName(name string) string { return k.join("aggregate_names", name) }

// AggregateLastID holds the last integer id given to an aggregate (outside
// the Aggregates prefix, which holds only aggregate records).
func (k Keys) AggregateLastID() string { return k.join("aggregate_last_id") }

// ---- cells -----------------------------------------------------------------

// Cell is a cell record.
func (k Keys) Cell(cell string) string { return k.join("cells", cell) }

// CellsPrefix is the prefix of cell records and everything in cells. Cell
// records are the keys directly under it with no further slash.
func (k Keys) CellsPrefix() string { return k.join("cells") + "/" }

// HostMapping maps a host to its cell.
func (k Keys) HostMapping(host string) string { return k.join("host_mappings", host) }

// HostMappings is the prefix of every host mapping.
func (k Keys) HostMappings() string { return k.join("host_mappings") + "/" }

// CellInstance is the instance record inside its cell.
func (k Keys) CellInstance(cell, uuid string) string {
	return k.join("cells", cell, "instances", uuid)
}

// CellInstances is the prefix of one cell's instance records.
func (k Keys) CellInstances(cell string) string { return k.join("cells", cell, "instances") + "/" }

// Retry is a reschedule work item filed for a cell's conductors.
func (k Keys) Retry(cell, uuid string) string { return k.join("cells", cell, "retries", uuid) }

// Retries is the prefix a cell's conductors watch.
func (k Keys) Retries(cell string) string { return k.join("cells", cell, "retries") + "/" }

// RetryHolder registers one running queue of a cell's conductors (id: its
// session lease in hex), bound to that lease: the conductors spread the
// cell's retries over the holders registered here.
func (k Keys) RetryHolder(cell, id string) string { return k.join("cells", cell, "holders", id) }

// RetryHolders is the prefix of one cell's queue holder registrations.
func (k Keys) RetryHolders(cell string) string { return k.join("cells", cell, "holders") + "/" }

// RetryLease marks the conductor holding a retry; bound to its lease.
func (k Keys) RetryLease(cell, uuid string) string { return k.join("cells", cell, "leases", uuid) }

// ---- moves (resize, cold migration) ----------------------------------------

// Migration is one move of an instance (Nova's migrations row), kept in
// the instance's cell; its uuid is also the placement consumer holding
// the source's allocation while the move is in flight.
func (k Keys) Migration(cell, uuid string) string { return k.join("cells", cell, "migrations", uuid) }

// Migrations is the prefix of one cell's migration records.
func (k Keys) Migrations(cell string) string { return k.join("cells", cell, "migrations") + "/" }

// MigrationMapping names the cell of a migration whose consumer may hold
// an allocation (from its creation until it is confirmed, reverted, has
// ended in error or its server was deleted): the leader's orphan duty
// finds a migration's consumer here, as an instance's under
// InstanceMapping, and leaves it alone.
func (k Keys) MigrationMapping(uuid string) string { return k.join("migration_mappings", uuid) }

// MigrationMappings is the prefix of every migration mapping.
func (k Keys) MigrationMappings() string { return k.join("migration_mappings") + "/" }

// ShelvedOffload is the leader's due date of a shelved server's offload.
func (k Keys) ShelvedOffload(uuid string) string { return k.join("shelved_offloads", uuid) }

// ShelvedOffloads is the prefix of every shelved server's offload due date.
func (k Keys) ShelvedOffloads() string { return k.join("shelved_offloads") + "/" }

// MoveRequest asks the superconductors to schedule an instance's move
// (by instance uuid: an instance has one move in flight at most).
func (k Keys) MoveRequest(uuid string) string { return k.join("move_requests", uuid) }

// MoveRequests is the prefix superconductors watch for moves.
func (k Keys) MoveRequests() string { return k.join("move_requests") + "/" }

// MoveRequestLease marks the superconductor scheduling a move; bound to
// its session lease.
func (k Keys) MoveRequestLease(uuid string) string { return k.join("leases", "move_requests", uuid) }

// MoveRequestLeases is the prefix of every move-request lease.
func (k Keys) MoveRequestLeases() string { return k.join("leases", "move_requests") + "/" }

// MoveRequestHolder registers one running superconductor move queue (id:
// its session lease in hex), bound to that lease.
func (k Keys) MoveRequestHolder(id string) string { return k.join("holders", "move_requests", id) }

// MoveRequestHolders is the prefix of the move queue holders.
func (k Keys) MoveRequestHolders() string { return k.join("holders", "move_requests") + "/" }

// ---- coordination ----------------------------------------------------------

// Election is the prefix for a role's leader election; each candidate's
// key is <prefix>/<lease id in hex> (etcd concurrency.Election).
func (k Keys) Election(role string) string { return k.join("elections", role) }

// Member is a lease-bound registration of one running server role.
func (k Keys) Member(role, id string) string { return k.join("members", role, id) }

// Members is the prefix of one role's registrations.
func (k Keys) Members(role string) string { return k.join("members", role) + "/" }

// ---- identity --------------------------------------------------------------

// IdentitySigningKey is the secret the identity API signs its tokens
// with. It is created once, when absent, by the first server to serve
// identity; every server reads the same key, so each accepts the tokens
// of all.
func (k Keys) IdentitySigningKey() string { return k.join("identity", "signing_key") }

// ---- quotas ----------------------------------------------------------------

// QuotaSet is one project's quota limits set through os-quota-sets (the
// keys not set take the configured defaults).
func (k Keys) QuotaSet(project string) string { return k.join("quotas", "sets", project) }

// QuotaFence is one project's usage fence: every create that counts the
// project's usage against its quotas compares this key's revision with
// the revision it counted at and rewrites it, in the transaction that
// stores what it creates (package quotas).
func (k Keys) QuotaFence(project string) string { return k.join("quotas", "fences", project) }

// QuotaFences is the prefix of every project's QuotaFence.
func (k Keys) QuotaFences() string { return k.join("quotas", "fences") + "/" }

// QuotaInstance is one server of project in the per-project index that
// quota counting reads instead of every instance mapping: written in
// the transaction that writes the server's InstanceMapping at create,
// deleted in the one that deletes it.
func (k Keys) QuotaInstance(project, uuid string) string {
	return k.join("quotas", "instances", project, uuid)
}

// QuotaInstances is the prefix of project's QuotaInstance keys.
func (k Keys) QuotaInstances(project string) string {
	return k.join("quotas", "instances", project) + "/"
}

// QuotaInstancesAll is the prefix of every project's QuotaInstance keys.
func (k Keys) QuotaInstancesAll() string { return k.join("quotas", "instances") + "/" }

// QuotaIndex says the per-project index is complete as of a revision:
// the leader writes it once it has indexed every instance mapping (an
// upgrade from a Berth without the index), and counting trusts the index
// only while it exists.
func (k Keys) QuotaIndex() string { return k.join("quotas", "index") }

// ---- status ----------------------------------------------------------------

// ServerCounts is the leader's last count of servers by status and cell
// (what berth_servers exports), for readers that must not read every
// server to show the numbers: the web console's overview.
func (k Keys) ServerCounts() string { return k.join("server_counts") }

// ---- load tool -------------------------------------------------------------

// BenchCAS is one worker's scratch key for `berth bench -baseline`: the
// etcd compare-and-swap transactions Berth's claims are measured against.
// The tool deletes them when it is done.
func (k Keys) BenchCAS(worker int) string { return k.benchCAS(strconv.Itoa(worker)) }

// benchCAS spells BenchCAS with the worker as a string (for ParseKey).
func (k Keys) benchCAS(worker string) string { return k.join("bench", "cas", worker) }

// BenchCASPrefix is the prefix of every BenchCAS key.
func (k Keys) BenchCASPrefix() string { return k.join("bench", "cas") + "/" }

// ---- parsing ---------------------------------------------------------------

// LastSegment returns the part of key after the last "/" when key starts
// with prefix, e.g. the uuid of a key under Builds(host).
func LastSegment(key, prefix string) (string, bool) {
	if !strings.HasPrefix(key, prefix) {
		return "", false
	}
	rest := key[len(prefix):]
	if rest == "" || strings.Contains(rest, "/") {
		return "", false
	}
	return rest, true
}

// ParseHostKey splits a key under HostsPrefix into host and the rest
// ("service", "alive", "instances/<uuid>", "builds/<uuid>", "sync").
// Every scheduler parses every key it follows under the hosts prefix, so
// the prefix is matched in place rather than built per call.
func (k Keys) ParseHostKey(key string) (host, rest string, err error) {
	const hosts = "/hosts/"
	if !strings.HasPrefix(key, k.prefix) || !strings.HasPrefix(key[len(k.prefix):], hosts) {
		return "", "", fmt.Errorf("key %q is not under %s", key, k.HostsPrefix())
	}
	host, rest, ok := strings.Cut(key[len(k.prefix)+len(hosts):], "/")
	if !ok || host == "" || rest == "" {
		return "", "", fmt.Errorf("key %q is not a host key", key)
	}
	return host, rest, nil
}

// BuildRequestLeases is the prefix of every build-request lease.
func (k Keys) BuildRequestLeases() string { return k.join("leases", "build_requests") + "/" }

// RetryLeases is the prefix of one cell's retry leases.
func (k Keys) RetryLeases(cell string) string { return k.join("cells", cell, "leases") + "/" }

// FirstSegment returns the part of key after prefix up to the next "/",
// e.g. the cell name of any key under CellsPrefix.
func FirstSegment(key, prefix string) string {
	rest := strings.TrimPrefix(key, prefix)
	seg, _, _ := strings.Cut(rest, "/")
	return seg
}
