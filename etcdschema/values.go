package etcdschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Every value stored by Berth carries a "version" field. Decode refuses a
// value whose version is missing or newer than this build understands, with
// an error naming the key, so a mixed-version deployment never silently
// misreads a record. Bump a type's version when its meaning changes, and
// teach Decode's caller to upgrade older versions.
const (
	ServiceVersion         = 1
	AliveVersion           = 1
	InstanceInfoVersion    = 1
	HostSyncVersion        = 1
	BuildVersion           = 2 // 2: a build cast leaves out what its instance holds (cast_compact.go)
	FlavorVersion          = 1
	BuildRequestVersion    = 1
	InstanceMappingVersion = 1
	InstanceVersion        = 1
	CellVersion            = 1
	HostMappingVersion     = 1
	AlternatesVersion      = 2 // 2: compact selections (alternates_compact.go)
	RetryVersion           = 1
	LeaseVersion           = 1
	MemberVersion          = 1
	HostDownVersion        = 1
	HostCapacityVersion    = 1
	SigningKeyVersion      = 1
	QuotaSetVersion        = 1
	QuotaFenceVersion      = 1
	QuotaInstanceVersion   = 1
	QuotaIndexVersion      = 1
	ServerCountsVersion    = 1
)

// Versioned is implemented by every value type.
type Versioned interface {
	// SchemaVersion is the version this build writes for the type.
	SchemaVersion() int
	storedVersion() int
	setVersion(int)
}

// header is embedded by every value type.
type header struct {
	Version int `json:"version"`
}

func (h *header) storedVersion() int { return h.Version }
func (h *header) setVersion(v int)   { h.Version = v }

// ErrUnsupportedVersion is wrapped by Decode for versions it cannot read.
var ErrUnsupportedVersion = errors.New("unsupported value version")

// Encode stamps v with its current version and marshals it: with the
// type's own encoder when it has one (fastEncoder, byte-identical), else
// or where that declines with encoding/json.
func Encode(v Versioned) ([]byte, error) {
	v.setVersion(v.SchemaVersion())
	if f, ok := v.(fastEncoder); ok {
		if b, ok := f.appendJSON(make([]byte, 0, f.sizeHint())); ok {
			return b, nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

// EncodeString is Encode returning the value as the string an etcd put
// takes. A type with its own encoder writes into a pooled scratch buffer
// and the string is the one copy made: a claim encodes two records, and
// Encode's buffer (sized above the record) and the string made of it were
// two allocations each.
func EncodeString(v Versioned) (string, error) {
	return encodeCopy(v, func(b []byte) string { return string(b) })
}

// EncodeBytes is EncodeString returning bytes, for a put built as an
// etcd message (rawtxn.PutBytes), which takes them as they are: the
// string and the put's copy of it were two allocations of every value.
func EncodeBytes(v Versioned) ([]byte, error) {
	return encodeCopy(v, bytes.Clone)
}

// encodeCopy encodes v into a pooled scratch buffer and returns copied's
// copy of it (the one allocation the value costs), or of encoding/json's
// bytes where v has no encoder of its own or it declines.
func encodeCopy[T string | []byte](v Versioned, copied func([]byte) T) (T, error) {
	v.setVersion(v.SchemaVersion())
	if f, ok := v.(fastEncoder); ok {
		bp := encodeBufs.Get().(*[]byte)
		if b, ok := f.appendJSON((*bp)[:0]); ok {
			out := copied(b)
			// A buffer grown for an unusually large record is not kept.
			if cap(b) <= maxPooledEncodeBuf {
				*bp = b[:0]
				encodeBufs.Put(bp)
			}
			return out, nil
		}
		encodeBufs.Put(bp) // declined: appendJSON kept nothing of it
	}
	b, err := json.Marshal(v)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("encode %T: %w", v, err)
	}
	return copied(b), nil
}

// encodeBufs holds EncodeString's scratch buffers; a buffer is used by
// one call at a time and nothing keeps it after the call.
var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledEncodeBuf = 64 << 10

// MustEncode is EncodeString for values that cannot fail to marshal
// (plain structs of strings, numbers, maps and slices).
func MustEncode(v Versioned) string {
	s, err := EncodeString(v)
	if err != nil {
		panic(err)
	}
	return s
}

// MustEncodeBytes is MustEncode returning bytes (EncodeBytes).
func MustEncodeBytes(v Versioned) []byte {
	b, err := EncodeBytes(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Decode unmarshals the value stored at key into v and checks its version.
func Decode(key string, data []byte, v Versioned) error {
	if f, ok := v.(fastDecoder); !ok || !f.decodeFast(data) {
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("decode %s: %w", key, err)
		}
	}
	if err := checkVersion(key, v); err != nil {
		return err
	}
	if c, ok := v.(completer); ok {
		return c.complete(key)
	}
	return nil
}

// completer is a value whose stored form leaves out members it takes from
// another part of the record (a compact build cast, cast_compact.go):
// complete fills them in after either decoder, so both give one value
// and one error.
type completer interface {
	complete(key string) error
}

// checkVersion refuses a decoded value whose version this build does not
// read.
func checkVersion(key string, v Versioned) error {
	got := v.storedVersion()
	if got < 1 || got > v.SchemaVersion() {
		return fmt.Errorf("decode %s: version %d (this build reads 1..%d): %w",
			key, got, v.SchemaVersion(), ErrUnsupportedVersion)
	}
	return nil
}

// ---- hosts -----------------------------------------------------------------

// Service is a compute host's service record (Nova's services table row).
// The agent writes everything but the Disabled*/ForcedDown fields, which the
// API owns; both write with a compare on the key's mod revision.
type Service struct {
	header
	Host           string `json:"host"`
	Cell           string `json:"cell"`
	ProviderUUID   string `json:"provider_uuid"`
	Disabled       bool   `json:"disabled"`
	DisabledReason string `json:"disabled_reason,omitempty"`
	ForcedDown     bool   `json:"forced_down"`
	AgentVersion   string `json:"agent_version"`
	FailedBuilds   int    `json:"failed_builds"`
	// CanLiveMigrate says the host's driver can live-migrate (the agent
	// writes it at registration): the API refuses a live migration of a
	// server whose host cannot (Nova's MigrationPreCheckError). Added
	// without a version bump; absent, an older agent, means cannot.
	CanLiveMigrate bool      `json:"can_live_migrate,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

func (*Service) SchemaVersion() int { return ServiceVersion }

// Alive is written under the agent's lease.
type Alive struct {
	header
	Host    string    `json:"host"`
	LeaseID int64     `json:"lease_id"`
	Since   time.Time `json:"since"`
}

func (*Alive) SchemaVersion() int { return AliveVersion }

// InstanceInfo is what an agent tells every scheduler about one instance on
// its host (seed isolate-scheduler-db).
type InstanceInfo struct {
	header
	UUID      string    `json:"uuid"`
	Host      string    `json:"host"`
	FlavorID  string    `json:"flavor_id"`
	Flavor    string    `json:"flavor"`
	State     string    `json:"state"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (*InstanceInfo) SchemaVersion() int { return InstanceInfoVersion }

// HostSync is the agent's periodic list of every instance uuid on its host.
type HostSync struct {
	header
	Host  string   `json:"host"`
	UUIDs []string `json:"uuids"`
	// FlavorIDs pairs with UUIDs: FlavorIDs[i] is the flavor id of
	// UUIDs[i] as the instance's own record has it, "" when the record
	// does not place it on this host (the source of a move in flight), so
	// a schedulers' view whose flavor differs (a resize whose instance
	// info update was lost, the case seed isolate-scheduler-db leaves
	// open) is caught too. Added without a version bump: a record of an
	// older agent has none (compare the uuids only), and an older
	// scheduler's decoder skips the member (its fast path declines and
	// encoding/json ignores it).
	FlavorIDs []string  `json:"flavor_ids,omitempty"`
	At        time.Time `json:"at"`
}

func (*HostSync) SchemaVersion() int { return HostSyncVersion }

// Flavors returns each synced instance's flavor id by uuid, only the
// known ones; nil when the record carries no flavors (an older agent's)
// or they do not pair with its uuids.
func (h *HostSync) Flavors() map[string]string {
	if len(h.FlavorIDs) == 0 || len(h.FlavorIDs) != len(h.UUIDs) {
		return nil
	}
	out := make(map[string]string, len(h.UUIDs))
	for i, u := range h.UUIDs {
		if h.FlavorIDs[i] != "" {
			out[u] = h.FlavorIDs[i]
		}
	}
	return out
}

// HostCapacity is what an agent reports of its host outside Placement,
// as Nova's compute node record did for the legacy scheduler: the
// inventories it gives its provider, and what the instances its cell
// places on the host use, by resource class. The scheduler's
// empty-Placement fallback (seed resource-providers-scheduler-db-filters)
// filters on it while no provider exists.
type HostCapacity struct {
	header
	Host        string               `json:"host"`
	Inventories map[string]Inventory `json:"inventories"`
	Used        map[string]int64     `json:"used"`
	At          time.Time            `json:"at"`
}

func (*HostCapacity) SchemaVersion() int { return HostCapacityVersion }

// HostDown records that a host's agent is down, written by the leader
// scheduler (fenced). Since survives a change of leader, so the grace
// before the down host's casts are handled is counted once.
type HostDown struct {
	header
	Host       string    `json:"host"`
	Since      time.Time `json:"since"`
	DetectedBy string    `json:"detected_by"`
}

func (*HostDown) SchemaVersion() int { return HostDownVersion }

// Build operations cast to a host.
const (
	OpBuild  = "build"
	OpDelete = "delete"
	// OpMove is one step of a resize or cold migration (Build.Move).
	OpMove = "move"
)

// Build is work cast to a host's agent.
type Build struct {
	header
	Op           string    `json:"op"`
	InstanceUUID string    `json:"instance_uuid"`
	Name         string    `json:"name"`
	Cell         string    `json:"cell"`
	Flavor       Flavor    `json:"flavor"`
	ProjectID    string    `json:"project_id"`
	UserID       string    `json:"user_id"`
	Attempt      int       `json:"attempt"`
	RequestID    string    `json:"request_id,omitempty"`
	CastAt       time.Time `json:"cast_at"`
	// Image is what the instance boots (nil: none, as before images
	// existed: the process driver runs the flavor's berth:command).
	Image *BootImage `json:"image,omitempty"`
	// Move is the step of a move cast (op "move"); nil otherwise.
	// Added without a version bump: absent in every other cast.
	Move *MoveStep `json:"move,omitempty"`
	// Instance is the instance record exactly as the transaction that
	// wrote this cast wrote it (a build's hand-off, a retry's), so the
	// agent need not read it back: the cast's mod revision is then the
	// instance's, and the outcome transaction compares the instance's
	// mod revision with it (CarriesInstance). Empty in every other cast
	// and in casts written before it (the agent reads the instance).
	// Kept as bytes: nobody but the agent decodes it, and it only when
	// it builds. Added without a version bump.
	Instance json.RawMessage `json:"instance,omitempty"`
	// Alternates is the encoded Alternates record of a build (the hosts
	// left to retry on and the attempts made), carried here since it
	// lives exactly as long as the build cast: filing a retry copies the
	// cast into the Retry, and the cell conductor casts the next attempt
	// with the list it has left. Before, it was a key of its own
	// (Keys.Alternates) put by the hand-off and deleted by the agent; such
	// a key, written by an older Berth, is still read and wins over the
	// cast (CarriedAlternates). Bytes for the same reason as Instance.
	Alternates json.RawMessage `json:"alternates,omitempty"`
	// carried is Instance decoded, by complete (a version 2 cast), until
	// CarriedInstance hands it over.
	carried *Instance
}

// CarriesInstance reports whether the cast carries its instance record,
// written in the same transaction: at revision castRev (the cast's mod
// revision) the instance's mod revision is castRev as well.
func (b *Build) CarriesInstance() bool { return len(b.Instance) > 0 }

// CarriedAlternates decodes the alternates the cast carries; ok is false
// when it carries none (a cast written before they moved into it, or
// one that is not a build's).
func (b *Build) CarriedAlternates(key string) (alts *Alternates, ok bool, err error) {
	if len(b.Alternates) == 0 {
		return nil, false, nil
	}
	alts = new(Alternates)
	if err := Decode(key, b.Alternates, alts); err != nil {
		return nil, false, fmt.Errorf("alternates carried in the cast: %w", err)
	}
	return alts, true, nil
}

func (*Build) SchemaVersion() int { return BuildVersion }

// BootImage is the image a server boots, embedded in its records as Nova
// embeds a flavor: an image deleted later does not change what the
// server runs. Command is the process driver's argv (empty for an image
// only the fake driver boots).
type BootImage struct {
	ID      string   `json:"id"`
	Name    string   `json:"name,omitempty"`
	Command []string `json:"command,omitempty"`
}

// ---- API level -------------------------------------------------------------

// Flavor is Nova's flavor: sizes plus extra specs, and the attributes
// only Nova's flavor API reads (description, rxtx_factor, is_public and
// its access list).
//
// Those came later and are added without a version bump: each is
// omitted when it has its zero value, and the zero value means what a
// record written before them meant (no description, rxtx_factor 1.0,
// public, nobody listed). So a record an older build wrote decodes here
// unchanged, and one this build writes decodes in an older build, which
// reads it as a public flavor of the same sizes. A change whose zero
// value cannot mean the old behaviour must bump FlavorVersion instead.
type Flavor struct {
	header
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	VCPUs       int               `json:"vcpus"`
	RAMMB       int               `json:"ram"`
	DiskGB      int               `json:"disk"`
	EphemeralGB int               `json:"ephemeral"`
	SwapMB      int               `json:"swap"`
	ExtraSpecs  map[string]string `json:"extra_specs,omitempty"`
	// Description is Nova's flavor description (microversion 2.55);
	// nil is Nova's None, which is not "".
	Description *string `json:"description,omitempty"`
	// RXTXFactor is Nova's rxtx_factor; 0 is its default, 1.0 (Nova
	// refuses 0 and below, so 0 never means a value of its own).
	RXTXFactor float64 `json:"rxtx_factor,omitempty"`
	// Private is Nova's is_public false: only the Projects may use it.
	Private  bool     `json:"private,omitempty"`
	Projects []string `json:"projects,omitempty"`
}

func (*Flavor) SchemaVersion() int { return FlavorVersion }

// IsPublic is Nova's is_public.
func (f *Flavor) IsPublic() bool { return !f.Private }

// RXTX is Nova's rxtx_factor, 1.0 when never set.
func (f *Flavor) RXTX() float64 {
	if f.RXTXFactor == 0 {
		return 1
	}
	return f.RXTXFactor
}

// Embedded is the flavor as a server carries it (a BuildRequest, an
// Instance, a build cast): its sizes and extra specs, without the
// attributes only the flavor API reads, which every scheduler would
// otherwise decode with each cast.
func (f Flavor) Embedded() Flavor {
	f.Description, f.RXTXFactor, f.Private, f.Projects = nil, 0, false, nil
	return f
}

// SchedulerHints are Nova's os:scheduler_hints that Berth understands.
type SchedulerHints struct {
	SameHost      []string `json:"same_host,omitempty"`
	DifferentHost []string `json:"different_host,omitempty"`
	Group         string   `json:"group,omitempty"`
}

// BuildRequest is a server the user asked for, before it has a cell.
type BuildRequest struct {
	header
	InstanceUUID     string         `json:"instance_uuid"`
	Name             string         `json:"name"`
	ReservationID    string         `json:"reservation_id"`
	Index            int            `json:"index"`
	Count            int            `json:"count"`
	Flavor           Flavor         `json:"flavor"`
	ProjectID        string         `json:"project_id"`
	UserID           string         `json:"user_id"`
	AvailabilityZone string         `json:"availability_zone,omitempty"`
	Hints            SchedulerHints `json:"scheduler_hints,omitempty"`
	RequestID        string         `json:"request_id,omitempty"`
	CreatedAt        time.Time      `json:"created_at"`
	// Host and Node are the requested destination, when the user named
	// one (Nova's host / hypervisor_hostname); empty otherwise.
	Host string `json:"host,omitempty"`
	Node string `json:"hypervisor_hostname,omitempty"`

	// Added without a version bump (each omitted at its zero value,
	// which means what a record written before it meant): the image
	// the server boots (nil: none), Nova's server metadata and
	// description (nil: None).
	Image       *BootImage        `json:"image,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Description *string           `json:"description,omitempty"`
	// Forced says Host and Node were forced (availability_zone
	// "zone:host[:node]", Nova's force_hosts / force_nodes): the
	// scheduler places on them without running its filters. False:
	// a requested destination (2.74), which goes through them.
	Forced bool `json:"forced_host,omitempty"`
}

func (*BuildRequest) SchemaVersion() int { return BuildRequestVersion }

// CarryTo copies to in, the instance br becomes (scheduled, or buried in
// cell0), what the user asked for that the instance keeps showing: the
// image, metadata, description, reservation, launch index, group and
// the create's request id.
func (br *BuildRequest) CarryTo(in *Instance) {
	in.Image, in.Metadata, in.Description = br.Image, br.Metadata, br.Description
	in.ReservationID, in.LaunchIndex, in.Group = br.ReservationID, br.Index, br.Hints.Group
	in.RequestID = br.RequestID
	in.RequestedAZ = br.AvailabilityZone
}

// Cell0 is where instances that could not be scheduled are buried, as in
// Nova: they have no host and exist only to show the user the fault.
const Cell0 = "cell0"

// InstanceMapping tells the API which cell holds an instance.
type InstanceMapping struct {
	header
	InstanceUUID string    `json:"instance_uuid"`
	Cell         string    `json:"cell"`
	ProjectID    string    `json:"project_id"`
	CreatedAt    time.Time `json:"created_at"`
}

func (*InstanceMapping) SchemaVersion() int { return InstanceMappingVersion }

// Nova's server status words.
const (
	StatusBuild  = "BUILD"
	StatusActive = "ACTIVE"
	// StatusVerifyResize is a server moved to its destination and
	// waiting for confirmResize or revertResize (Nova's vm_state
	// resized).
	StatusVerifyResize = "VERIFY_RESIZE"
	StatusError        = "ERROR"
	StatusDeleted      = "DELETED"
)

// Task states shown beside BUILD.
const (
	TaskScheduling = "scheduling"
	TaskSpawning   = "spawning"
	TaskDeleting   = "deleting"
	// Nova's task states of a cold move (resize or migrate).
	TaskResizePrep      = "resize_prep"
	TaskResizeMigrating = "resize_migrating"
	TaskResizeMigrated  = "resize_migrated"
	TaskResizeFinish    = "resize_finish"
	TaskResizeReverting = "resize_reverting"
)

// Fault explains why an instance is in ERROR.
type Fault struct {
	Code    int       `json:"code"`
	Message string    `json:"message"`
	Details string    `json:"details,omitempty"`
	Created time.Time `json:"created"`
}

// Instance is the record of an instance inside its cell.
type Instance struct {
	header
	UUID             string    `json:"uuid"`
	Name             string    `json:"name"`
	Status           string    `json:"status"`
	TaskState        string    `json:"task_state,omitempty"`
	Host             string    `json:"host,omitempty"`
	Node             string    `json:"node,omitempty"`
	Cell             string    `json:"cell"`
	Flavor           Flavor    `json:"flavor"`
	ProjectID        string    `json:"project_id"`
	UserID           string    `json:"user_id"`
	AvailabilityZone string    `json:"availability_zone,omitempty"`
	Fault            *Fault    `json:"fault,omitempty"`
	Attempts         int       `json:"attempts"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`

	// FailedAttempts are the builds that failed before the current one,
	// with their reasons; written by the cell conductor with each retry so
	// they outlive the alternates record, which goes when the instance is
	// ACTIVE. Absent in records written before it existed.
	FailedAttempts []Attempt `json:"failed_attempts,omitempty"`

	// Carried over from the BuildRequest by the superconductor, and
	// absent (zero) in records written before they existed: the image,
	// metadata and description; the reservation and launch index of a
	// multi-create (Nova's reservation_id, launch_index); the server
	// group of a group hint.
	Image         *BootImage        `json:"image,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	Description   *string           `json:"description,omitempty"`
	ReservationID string            `json:"reservation_id,omitempty"`
	LaunchIndex   int               `json:"launch_index,omitempty"`
	Group         string            `json:"group,omitempty"`
	// RequestID is the create's request (Nova's instance action
	// "create"); DeleteRequestID the delete's, once one was accepted
	// (the "delete" action, while the host works it).
	RequestID       string `json:"request_id,omitempty"`
	DeleteRequestID string `json:"delete_request_id,omitempty"`
	// MigrationUUID is the move in flight (resize or cold migration)
	// until it is confirmed, reverted or has failed; its record is
	// Keys.Migration(Cell, MigrationUUID). Added without a version bump
	// (absent: no move).
	MigrationUUID string `json:"migration_uuid,omitempty"`
	// Added without a version bump for shelving (shelve.go), each
	// absent when unused: the zone the create (or an unshelve, 2.77)
	// asked for, which an unshelve schedules into (Nova's
	// request_spec.availability_zone); the shelved server's state; the
	// shelve actions (Nova's instance actions shelve, shelveOffload,
	// unshelve).
	RequestedAZ   string         `json:"requested_availability_zone,omitempty"`
	Shelve        *ShelveState   `json:"shelve,omitempty"`
	ShelveActions []ServerAction `json:"shelve_actions,omitempty"`
}

func (*Instance) SchemaVersion() int { return InstanceVersion }

// ---- cells -----------------------------------------------------------------

// Cell is a cell record.
type Cell struct {
	header
	Name      string    `json:"name"`
	UUID      string    `json:"uuid"`
	Disabled  bool      `json:"disabled"`
	CreatedAt time.Time `json:"created_at"`
}

func (*Cell) SchemaVersion() int { return CellVersion }

// HostMapping maps a host to the cell it belongs to.
type HostMapping struct {
	header
	Host      string    `json:"host"`
	Cell      string    `json:"cell"`
	CreatedAt time.Time `json:"created_at"`
}

func (*HostMapping) SchemaVersion() int { return HostMappingVersion }

// Selection is Nova's Selection object: one candidate destination.
type Selection struct {
	ComputeNodeUUID          string         `json:"compute_node_uuid"`
	ServiceHost              string         `json:"service_host"`
	Nodename                 string         `json:"nodename"`
	Cell                     string         `json:"cell_uuid"`
	Limits                   map[string]any `json:"limits,omitempty"`
	AllocationRequest        string         `json:"allocation_request,omitempty"`
	AllocationRequestVersion string         `json:"allocation_request_version,omitempty"`
	AvailabilityZone         string         `json:"availability_zone,omitempty"`
}

// Attempt records one build try and how it ended.
type Attempt struct {
	Host   string    `json:"host"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// Alternates is the remaining Selection list for an instance plus the
// attempts made so far (seed return-alternate-hosts, etcd alternative).
type Alternates struct {
	header
	InstanceUUID string      `json:"instance_uuid"`
	Cell         string      `json:"cell"`
	MaxAttempts  int         `json:"max_attempts"`
	Remaining    []Selection `json:"remaining"`
	Attempts     []Attempt   `json:"attempts"`
	// Group is the server group the instance was scheduled into, if any:
	// a retry on an alternate must still keep the group's policy.
	Group string `json:"group,omitempty"`
}

func (*Alternates) SchemaVersion() int { return AlternatesVersion }

// Retry is a reschedule work item for a cell's conductors.
type Retry struct {
	header
	InstanceUUID string    `json:"instance_uuid"`
	Cell         string    `json:"cell"`
	FailedHost   string    `json:"failed_host"`
	Reason       string    `json:"reason"`
	Build        Build     `json:"build"`
	FiledAt      time.Time `json:"filed_at"`
}

func (*Retry) SchemaVersion() int { return RetryVersion }

// Lease names the holder of a leased work item.
type Lease struct {
	header
	Holder  string    `json:"holder"`
	LeaseID int64     `json:"lease_id"`
	Since   time.Time `json:"since"`
}

func (*Lease) SchemaVersion() int { return LeaseVersion }

// Member is a running server role's registration.
type Member struct {
	header
	Role    string    `json:"role"`
	ID      string    `json:"id"`
	URL     string    `json:"url,omitempty"`
	Started time.Time `json:"started"`
}

func (*Member) SchemaVersion() int { return MemberVersion }

// SigningKey is the identity API's token signing secret (HMAC-SHA256).
// It is a secret: anyone who reads it can forge a token of any user, so
// etcd's own access control must keep it from all but Berth's servers.
type SigningKey struct {
	header
	Key     []byte    `json:"key"` // 32 random bytes; base64 in JSON
	Created time.Time `json:"created"`
}

func (*SigningKey) SchemaVersion() int { return SigningKeyVersion }

// QuotaSet is a project's quota limits as os-quota-sets set them: only
// the resources set (Nova's quotas table rows); the others take the
// configured defaults. Users holds per-user limits (os-quota-sets'
// user_id), by user id.
type QuotaSet struct {
	header
	Limits    map[string]int64            `json:"limits,omitempty"`
	Users     map[string]map[string]int64 `json:"users,omitempty"`
	UpdatedAt time.Time                   `json:"updated_at"`
}

func (*QuotaSet) SchemaVersion() int { return QuotaSetVersion }

// QuotaFence is a project's usage fence; its value only says who moved
// it last (for an operator reading etcd): the fence is its revision.
type QuotaFence struct {
	header
	RequestID string    `json:"request_id,omitempty"`
	At        time.Time `json:"at"`
	// Indexed says the writer keeps the per-project index (QuotaInstance)
	// with its creates. A fence moved without it after the index was
	// built (QuotaIndex.Revision) is an older Berth's create, whose
	// server the index may lack: the project is counted the old way until
	// the leader indexes again.
	Indexed bool `json:"indexed,omitempty"`
	// Usage, when present, is the project's usage record: at least what
	// a count of the project would find at any revision until the fence
	// moves again (package quotas, record.go), so a check that fits it
	// needs no count. Absent: unknown (a writer that keeps none, or a
	// Berth from before it), and the next check counts.
	Usage *QuotaUsage `json:"usage,omitempty"`
}

func (*QuotaFence) SchemaVersion() int { return QuotaFenceVersion }

// QuotaUsage is a project's usage record inside its QuotaFence: what it
// uses of the counted resources, as a count at Basis found it plus what
// every guarded create and move since added.
type QuotaUsage struct {
	Instances    int64 `json:"instances"`
	Cores        int64 `json:"cores"`
	RAM          int64 `json:"ram"`
	ServerGroups int64 `json:"server_groups"`
	// Basis is the revision of the count the record was last set from.
	Basis int64 `json:"basis"`
}

// QuotaInstance is one entry of the per-project index of servers
// (Keys.QuotaInstance): its key says everything; the value says when.
type QuotaInstance struct {
	header
	CreatedAt time.Time `json:"created_at"`
}

func (*QuotaInstance) SchemaVersion() int { return QuotaInstanceVersion }

// QuotaIndex says every instance mapping that existed at Revision has
// its QuotaInstance (Keys.QuotaIndex), written by the leader that built
// the index.
type QuotaIndex struct {
	header
	Revision int64     `json:"revision"`
	BuiltAt  time.Time `json:"built_at"`
	BuiltBy  string    `json:"built_by,omitempty"`
}

func (*QuotaIndex) SchemaVersion() int { return QuotaIndexVersion }

// ServerCounts is the leader's count of servers by Nova status and cell
// at Revision (Keys.ServerCounts); cell "none" holds the build requests.
type ServerCounts struct {
	header
	Revision  int64         `json:"revision"`
	CountedAt time.Time     `json:"counted_at"`
	Counts    []ServerCount `json:"counts"`
}

// ServerCount is one status and cell's servers.
type ServerCount struct {
	Status string `json:"status"`
	Cell   string `json:"cell"`
	Count  int    `json:"count"`
}

func (*ServerCounts) SchemaVersion() int { return ServerCountsVersion }
