package etcdschema

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// KeyKind says what a key holds: it is the name of the Keys method that
// spells the key (docs/etcd-keys.md has one entry per method), or
// KindElectionCandidate for the keys etcd's election writes below
// Keys.Election.
type KeyKind string

// Every kind of key Berth writes.
const (
	KindProvider            KeyKind = "Provider"
	KindProviderName        KeyKind = "ProviderName"
	KindConsumer            KeyKind = "Consumer"
	KindCustomTrait         KeyKind = "CustomTrait"
	KindCustomResourceClass KeyKind = "CustomResourceClass"

	KindService      KeyKind = "Service"
	KindAlive        KeyKind = "Alive"
	KindHostInstance KeyKind = "HostInstance"
	KindHostSync     KeyKind = "HostSync"
	KindHostDown     KeyKind = "HostDown"
	KindHostCapacity KeyKind = "HostCapacity"
	KindBuild        KeyKind = "Build"
	KindHostDrain    KeyKind = "HostDrain"

	KindFlavor             KeyKind = "Flavor"
	KindBuildRequest       KeyKind = "BuildRequest"
	KindBuildRequestLease  KeyKind = "BuildRequestLease"
	KindBuildRequestHolder KeyKind = "BuildRequestHolder"
	KindInstanceMapping    KeyKind = "InstanceMapping"
	KindAlternates         KeyKind = "Alternates"

	KindImage KeyKind = "Image"

	KindServerGroup             KeyKind = "ServerGroup"
	KindServerGroupMember       KeyKind = "ServerGroupMember"
	KindServerGroupSlot         KeyKind = "ServerGroupSlot"
	KindServerGroupAffinityHost KeyKind = "ServerGroupAffinityHost"
	KindAggregate               KeyKind = "Aggregate"
	KindAggregateName           KeyKind = "AggregateName"
	KindAggregateLastID         KeyKind = "AggregateLastID"

	KindCell         KeyKind = "Cell"
	KindHostMapping  KeyKind = "HostMapping"
	KindCellInstance KeyKind = "CellInstance"
	KindRetry        KeyKind = "Retry"
	KindRetryLease   KeyKind = "RetryLease"
	KindRetryHolder  KeyKind = "RetryHolder"

	KindMigration         KeyKind = "Migration"
	KindMigrationMapping  KeyKind = "MigrationMapping"
	KindMoveRequest       KeyKind = "MoveRequest"
	KindMoveRequestLease  KeyKind = "MoveRequestLease"
	KindMoveRequestHolder KeyKind = "MoveRequestHolder"
	KindShelvedOffload    KeyKind = "ShelvedOffload"

	// KindElectionCandidate is a key <Election(role)>/<lease id hex>,
	// written by etcd's concurrency.Election; its value is the candidate's
	// id as a plain string, not JSON.
	KindElectionCandidate KeyKind = "ElectionCandidate"
	KindMember            KeyKind = "Member"

	// KindBenchCAS is berth bench's scratch counter (not JSON); the worker
	// number is in Slot.
	KindBenchCAS KeyKind = "BenchCAS"

	KindIdentitySigningKey KeyKind = "IdentitySigningKey"
	KindQuotaSet           KeyKind = "QuotaSet"
	KindQuotaFence         KeyKind = "QuotaFence"
	KindQuotaInstance      KeyKind = "QuotaInstance"
	KindQuotaIndex         KeyKind = "QuotaIndex"
	KindServerCounts       KeyKind = "ServerCounts"
)

// ParsedKey is a key taken apart: its kind and the variable segments the
// Keys method was called with (the others are empty).
type ParsedKey struct {
	Kind  KeyKind
	Host  string // host of per-host keys, host mappings, slots
	Cell  string // cell of cell records and keys inside a cell
	UUID  string // instance, provider, consumer, aggregate or group uuid
	Name  string // flavor, trait, resource class or reserved name
	Group string // server group uuid of a group's sub-keys
	Role  string // election or member role
	ID    string // member id, or election candidate's or queue holder's lease id in hex
	Slot  int    // anti-affinity slot number
}

// keyPattern ties a kind to the Keys method spelling it: build is called
// with placeholders to learn the key's shape, so the spelling stays in
// the methods above.
type keyPattern struct {
	kind   KeyKind
	params []string // ParsedKey fields, in the order build takes them
	build  func(k Keys, a []string) string
	value  func() Versioned // nil: the value is not a Versioned JSON value
}

var keyPatterns = []keyPattern{
	{KindProvider, []string{"UUID"}, func(k Keys, a []string) string { return k.Provider(a[0]) }, func() Versioned { return new(Provider) }},
	{KindProviderName, []string{"Name"}, func(k Keys, a []string) string { return k.ProviderName(a[0]) }, func() Versioned { return new(ProviderName) }},
	{KindConsumer, []string{"UUID"}, func(k Keys, a []string) string { return k.Consumer(a[0]) }, func() Versioned { return new(Consumer) }},
	{KindCustomTrait, []string{"Name"}, func(k Keys, a []string) string { return k.CustomTrait(a[0]) }, func() Versioned { return new(CustomTrait) }},
	{KindCustomResourceClass, []string{"Name"}, func(k Keys, a []string) string { return k.CustomResourceClass(a[0]) }, func() Versioned { return new(CustomResourceClass) }},

	{KindService, []string{"Host"}, func(k Keys, a []string) string { return k.Service(a[0]) }, func() Versioned { return new(Service) }},
	{KindAlive, []string{"Host"}, func(k Keys, a []string) string { return k.Alive(a[0]) }, func() Versioned { return new(Alive) }},
	{KindHostInstance, []string{"Host", "UUID"}, func(k Keys, a []string) string { return k.HostInstance(a[0], a[1]) }, func() Versioned { return new(InstanceInfo) }},
	{KindHostSync, []string{"Host"}, func(k Keys, a []string) string { return k.HostSync(a[0]) }, func() Versioned { return new(HostSync) }},
	{KindHostDown, []string{"Host"}, func(k Keys, a []string) string { return k.HostDown(a[0]) }, func() Versioned { return new(HostDown) }},
	{KindHostCapacity, []string{"Host"}, func(k Keys, a []string) string { return k.HostCapacity(a[0]) }, func() Versioned { return new(HostCapacity) }},
	{KindBuild, []string{"Host", "UUID"}, func(k Keys, a []string) string { return k.Build(a[0], a[1]) }, func() Versioned { return new(Build) }},
	{KindHostDrain, []string{"Host"}, func(k Keys, a []string) string { return k.HostDrain(a[0]) }, func() Versioned { return new(HostDrain) }},

	{KindFlavor, []string{"Name"}, func(k Keys, a []string) string { return k.Flavor(a[0]) }, func() Versioned { return new(Flavor) }},
	{KindBuildRequest, []string{"UUID"}, func(k Keys, a []string) string { return k.BuildRequest(a[0]) }, func() Versioned { return new(BuildRequest) }},
	{KindBuildRequestLease, []string{"UUID"}, func(k Keys, a []string) string { return k.BuildRequestLease(a[0]) }, func() Versioned { return new(Lease) }},
	{KindBuildRequestHolder, []string{"ID"}, func(k Keys, a []string) string { return k.BuildRequestHolder(a[0]) }, func() Versioned { return new(Lease) }},
	{KindInstanceMapping, []string{"UUID"}, func(k Keys, a []string) string { return k.InstanceMapping(a[0]) }, func() Versioned { return new(InstanceMapping) }},
	{KindAlternates, []string{"UUID"}, func(k Keys, a []string) string { return k.Alternates(a[0]) }, func() Versioned { return new(Alternates) }},

	{KindImage, []string{"UUID"}, func(k Keys, a []string) string { return k.Image(a[0]) }, func() Versioned { return new(Image) }},

	{KindServerGroup, []string{"Group"}, func(k Keys, a []string) string { return k.ServerGroup(a[0]) }, func() Versioned { return new(ServerGroup) }},
	{KindServerGroupMember, []string{"Group", "UUID"}, func(k Keys, a []string) string { return k.ServerGroupMember(a[0], a[1]) }, func() Versioned { return new(ServerGroupMember) }},
	{KindServerGroupSlot, []string{"Group", "Host", "Slot"}, func(k Keys, a []string) string { return k.serverGroupSlot(a[0], a[1], a[2]) }, func() Versioned { return new(ServerGroupSlot) }},
	{KindServerGroupAffinityHost, []string{"Group"}, func(k Keys, a []string) string { return k.ServerGroupAffinityHost(a[0]) }, func() Versioned { return new(ServerGroupSlot) }},
	{KindAggregate, []string{"UUID"}, func(k Keys, a []string) string { return k.Aggregate(a[0]) }, func() Versioned { return new(Aggregate) }},
	{KindAggregateName, []string{"Name"}, func(k Keys, a []string) string { return k.AggregateName(a[0]) }, func() Versioned { return new(AggregateName) }},
	{KindAggregateLastID, nil, func(k Keys, a []string) string { return k.AggregateLastID() }, func() Versioned { return new(AggregateLastID) }},

	{KindCell, []string{"Cell"}, func(k Keys, a []string) string { return k.Cell(a[0]) }, func() Versioned { return new(Cell) }},
	{KindHostMapping, []string{"Host"}, func(k Keys, a []string) string { return k.HostMapping(a[0]) }, func() Versioned { return new(HostMapping) }},
	{KindCellInstance, []string{"Cell", "UUID"}, func(k Keys, a []string) string { return k.CellInstance(a[0], a[1]) }, func() Versioned { return new(Instance) }},
	{KindRetry, []string{"Cell", "UUID"}, func(k Keys, a []string) string { return k.Retry(a[0], a[1]) }, func() Versioned { return new(Retry) }},
	{KindRetryLease, []string{"Cell", "UUID"}, func(k Keys, a []string) string { return k.RetryLease(a[0], a[1]) }, func() Versioned { return new(Lease) }},
	{KindRetryHolder, []string{"Cell", "ID"}, func(k Keys, a []string) string { return k.RetryHolder(a[0], a[1]) }, func() Versioned { return new(Lease) }},
	{KindMigration, []string{"Cell", "UUID"}, func(k Keys, a []string) string { return k.Migration(a[0], a[1]) }, func() Versioned { return new(Migration) }},
	{KindMigrationMapping, []string{"UUID"}, func(k Keys, a []string) string { return k.MigrationMapping(a[0]) }, func() Versioned { return new(InstanceMapping) }},
	{KindMoveRequest, []string{"UUID"}, func(k Keys, a []string) string { return k.MoveRequest(a[0]) }, func() Versioned { return new(MoveRequest) }},
	{KindMoveRequestLease, []string{"UUID"}, func(k Keys, a []string) string { return k.MoveRequestLease(a[0]) }, func() Versioned { return new(Lease) }},
	{KindMoveRequestHolder, []string{"ID"}, func(k Keys, a []string) string { return k.MoveRequestHolder(a[0]) }, func() Versioned { return new(Lease) }},
	{KindShelvedOffload, []string{"UUID"}, func(k Keys, a []string) string { return k.ShelvedOffload(a[0]) }, func() Versioned { return new(ShelvedOffload) }},

	// concurrency.Election puts each candidate at <prefix>/<lease id hex>.
	{KindElectionCandidate, []string{"Role", "ID"}, func(k Keys, a []string) string { return k.Election(a[0]) + "/" + a[1] }, nil},
	{KindMember, []string{"Role", "ID"}, func(k Keys, a []string) string { return k.Member(a[0], a[1]) }, func() Versioned { return new(Member) }},
	{KindBenchCAS, []string{"Slot"}, func(k Keys, a []string) string { return k.benchCAS(a[0]) }, nil},
	{KindIdentitySigningKey, nil, func(k Keys, a []string) string { return k.IdentitySigningKey() }, func() Versioned { return new(SigningKey) }},
	{KindQuotaSet, []string{"ID"}, func(k Keys, a []string) string { return k.QuotaSet(a[0]) }, func() Versioned { return new(QuotaSet) }},
	{KindQuotaFence, []string{"ID"}, func(k Keys, a []string) string { return k.QuotaFence(a[0]) }, func() Versioned { return new(QuotaFence) }},
	{KindQuotaInstance, []string{"ID", "UUID"}, func(k Keys, a []string) string { return k.QuotaInstance(a[0], a[1]) }, func() Versioned { return new(QuotaInstance) }},
	{KindQuotaIndex, nil, func(k Keys, a []string) string { return k.QuotaIndex() }, func() Versioned { return new(QuotaIndex) }},
	{KindServerCounts, nil, func(k Keys, a []string) string { return k.ServerCounts() }, func() Versioned { return new(ServerCounts) }},
}

// placeholder marks variable segment i in a pattern's shape. It must be a
// clean segment (the Keys methods would escape anything else), and no
// constant segment of a key starts with "{".
func placeholder(i int) string { return "{" + strconv.Itoa(i) + "}" }

type keyShape struct {
	pattern  *keyPattern
	segments []string // after the prefix; placeholder(i) for parameter i
}

// keyShapes are the patterns' shapes relative to the prefix, computed once.
var keyShapes = sync.OnceValue(func() []keyShape {
	root := Keys{} // prefix "": every key starts with "/"
	out := make([]keyShape, 0, len(keyPatterns))
	for i := range keyPatterns {
		p := &keyPatterns[i]
		args := make([]string, len(p.params))
		for j := range args {
			args[j] = placeholder(j)
		}
		out = append(out, keyShape{pattern: p, segments: strings.Split(strings.TrimPrefix(p.build(root, args), "/"), "/")})
	}
	return out
})

// KeyKinds lists every kind ParseKey can return, in a stable order
// (placement, hosts, API level, groups and aggregates, cells, coordination).
func KeyKinds() []KeyKind {
	out := make([]KeyKind, len(keyPatterns))
	for i, p := range keyPatterns {
		out[i] = p.kind
	}
	return out
}

// NewValue returns a new value of the type stored under keys of kind, to
// Decode into; nil for KindElectionCandidate (a plain string) and for an
// unknown kind.
func NewValue(kind KeyKind) Versioned {
	for _, p := range keyPatterns {
		if p.kind == kind && p.value != nil {
			return p.value()
		}
	}
	return nil
}

// ParseKey says which key key is and with which segments it was spelled.
// It fails for a key outside the prefix or one no Keys method spells (an
// unknown key: a newer version's, or not Berth's).
func (k Keys) ParseKey(key string) (ParsedKey, error) {
	rest, ok := strings.CutPrefix(key, k.All())
	if !ok {
		return ParsedKey{}, fmt.Errorf("key %q is not under %s", key, k.All())
	}
	segs := strings.Split(rest, "/")
	for _, sh := range keyShapes() {
		if pk, ok := sh.match(segs); ok {
			return pk, nil
		}
	}
	return ParsedKey{}, fmt.Errorf("key %q matches no key Berth writes", key)
}

func (sh keyShape) match(segs []string) (ParsedKey, bool) {
	if len(segs) != len(sh.segments) {
		return ParsedKey{}, false
	}
	args := make([]string, len(sh.pattern.params))
	for i, want := range sh.segments {
		if strings.HasPrefix(want, "{") {
			if segs[i] == "" {
				return ParsedKey{}, false
			}
			j, _ := strconv.Atoi(want[1 : len(want)-1])
			args[j] = segs[i]
			continue
		}
		if segs[i] != want {
			return ParsedKey{}, false
		}
	}
	pk := ParsedKey{Kind: sh.pattern.kind}
	for j, name := range sh.pattern.params {
		v := args[j]
		switch name {
		case "Host":
			pk.Host = v
		case "Cell":
			pk.Cell = v
		case "UUID":
			pk.UUID = v
		case "Name":
			pk.Name = v
		case "Group":
			pk.Group = v
		case "Role":
			pk.Role = v
		case "ID":
			pk.ID = v
		case "Slot":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return ParsedKey{}, false
			}
			pk.Slot = n
		}
	}
	return pk, true
}
