package etcdschema

import "time"

// Versions of the server-group and aggregate values.
const (
	ServerGroupVersion       = 1
	ServerGroupMemberVersion = 1
	ServerGroupSlotVersion   = 1
	AggregateVersion         = 1
	AggregateNameVersion     = 1
	AggregateLastIDVersion   = 1
)

// Server group policies (Nova API 2.64: one policy per group).
const (
	PolicyAffinity         = "affinity"
	PolicyAntiAffinity     = "anti-affinity"
	PolicySoftAffinity     = "soft-affinity"
	PolicySoftAntiAffinity = "soft-anti-affinity"
)

// ServerGroupRules are a group's rules; only anti-affinity has one.
type ServerGroupRules struct {
	// MaxServerPerHost caps members per host for anti-affinity; 0 means
	// Nova's default of 1.
	MaxServerPerHost int `json:"max_server_per_host,omitempty"`
}

// ServerGroup is a server group: its members are keys below it
// (ServerGroupMember), so joining a group never rewrites this record.
type ServerGroup struct {
	header
	UUID      string           `json:"uuid"`
	Name      string           `json:"name"`
	Policy    string           `json:"policy"`
	Rules     ServerGroupRules `json:"rules"`
	ProjectID string           `json:"project_id"`
	UserID    string           `json:"user_id"`
	CreatedAt time.Time        `json:"created_at"`
}

func (*ServerGroup) SchemaVersion() int { return ServerGroupVersion }

// MaxPerHost is the anti-affinity cap with Nova's default applied.
func (g *ServerGroup) MaxPerHost() int {
	if g.Rules.MaxServerPerHost < 1 {
		return 1
	}
	return g.Rules.MaxServerPerHost
}

// ServerGroupMember is one member of a group. The API writes it with no
// host when the server is requested; the scheduler's claim sets the host.
type ServerGroupMember struct {
	header
	InstanceUUID string `json:"instance_uuid"`
	Host         string `json:"host,omitempty"`
	// MoveSource is the host a cold move in flight leaves: the member
	// keeps its place there (its anti-affinity slot) while the move may
	// still come back, as the migration's consumer keeps the source's
	// allocation. The API sets it when the move starts; a confirm, a
	// revert and a failed move clear it.
	MoveSource string    `json:"move_source,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

func (*ServerGroupMember) SchemaVersion() int { return ServerGroupMemberVersion }

// ServerGroupSlot is a placement guard: for anti-affinity one of the
// max_server_per_host slots a group has on a host, for affinity the
// group's one host. It names the instance that took it.
type ServerGroupSlot struct {
	header
	InstanceUUID string `json:"instance_uuid"`
	Host         string `json:"host"`
}

func (*ServerGroupSlot) SchemaVersion() int { return ServerGroupSlotVersion }

// AggregateAZKey is the metadata key that makes an aggregate an
// availability zone, as in Nova.
const AggregateAZKey = "availability_zone"

// Aggregate is a Nova host aggregate: a named set of hosts with metadata.
// Its UUID is also the placement aggregate its hosts' compute node
// providers are members of.
type Aggregate struct {
	header
	// ID is Nova's integer id (/os-aggregates/{id}), allocated from
	// AggregateLastID when the aggregate is created. It came after the
	// first records, so it is added without a version bump: 0 is a
	// record written before ids, given one by package aggregates on
	// its first read.
	ID        int               `json:"id,omitempty"`
	UUID      string            `json:"uuid"`
	Name      string            `json:"name"`
	Hosts     []string          `json:"hosts"`
	Metadata  map[string]string `json:"metadata"`
	CreatedAt time.Time         `json:"created_at"`
	// UpdatedAt is when the name or metadata last changed (Nova's
	// updated_at: host changes leave it); zero when never.
	UpdatedAt time.Time `json:"updated_at"`
}

func (*Aggregate) SchemaVersion() int { return AggregateVersion }

// AvailabilityZone is the aggregate's AZ ("" when it is not an AZ).
func (a *Aggregate) AvailabilityZone() string { return a.Metadata[AggregateAZKey] }

// HasHost reports whether host is in the aggregate.
func (a *Aggregate) HasHost(host string) bool {
	for _, h := range a.Hosts {
		if h == host {
			return true
		}
	}
	return false
}

// AggregateName reserves an aggregate's name.
type AggregateName struct {
	header
	UUID string `json:"uuid"`
}

func (*AggregateName) SchemaVersion() int { return AggregateNameVersion }

// AggregateLastID is the last integer id given to an aggregate. A create
// compares its mod revision, so two creates never take one id, and ids
// of deleted aggregates are not given again (as Nova's auto-increment).
type AggregateLastID struct {
	header
	ID int `json:"id"`
}

func (*AggregateLastID) SchemaVersion() int { return AggregateLastIDVersion }
