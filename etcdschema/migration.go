package etcdschema

import "time"

// Versions of the move records (see values.go for the rules).
const (
	MigrationVersion   = 1
	MoveRequestVersion = 1
)

// Nova's migration statuses (nova/objects/migration.py and the compute
// manager) that a cold move passes through. A resize or cold migration
// goes pre-migrating → migrating → post-migrating → finished (the
// server is VERIFY_RESIZE), then confirming → confirmed or reverting →
// reverted; error when it could not be done (the server stays on its
// source) and failed for a live migration that failed (not used by the
// cold moves).
const (
	MigrationPreMigrating  = "pre-migrating"
	MigrationMigrating     = "migrating"
	MigrationPostMigrating = "post-migrating"
	MigrationFinished      = "finished"
	MigrationConfirming    = "confirming"
	MigrationConfirmed     = "confirmed"
	MigrationReverting     = "reverting"
	MigrationReverted      = "reverted"
	MigrationError         = "error"
	MigrationFailed        = "failed"
	// The final statuses of the other moves: a live migration ends
	// completed (or cancelled when aborted), an evacuation done.
	MigrationCompleted = "completed"
	MigrationDone      = "done"
	MigrationCancelled = "cancelled"
)

// Nova's migration_type values for the cold moves.
// Nova's migration_type values: the cold moves, then the live
// migration and the evacuation (each kind's flow in its own files).
const (
	MigrationTypeResize        = "resize"
	MigrationTypeMigration     = "migration"
	MigrationTypeLiveMigration = "live-migration"
	MigrationTypeEvacuation    = "evacuation"
)

// MoveKindUnshelve is a MoveRequest that schedules a shelved-offloaded
// server again (unshelve has no migration record in Nova).
const MoveKindUnshelve = "unshelve"

// MigrationInFlight says whether a migration in status is still moving
// its server (Nova's migration filters call the rest "done").
func MigrationInFlight(status string) bool {
	switch status {
	case MigrationConfirmed, MigrationReverted, MigrationError, MigrationFailed,
		MigrationCompleted, MigrationDone, MigrationCancelled:
		return false
	}
	return true
}

// Migration is one move of an instance (Nova's migrations table row),
// kept in the instance's cell. While it is in flight its uuid is also a
// placement consumer: it holds the source host's allocation (Nova's
// migration-based allocations) while the instance's own consumer holds
// the destination's, so both hosts count the server until it is
// confirmed or reverted.
type Migration struct {
	header
	UUID          string `json:"uuid"`
	InstanceUUID  string `json:"instance_uuid"`
	Cell          string `json:"cell"`
	ProjectID     string `json:"project_id"`
	UserID        string `json:"user_id"`
	MigrationType string `json:"migration_type"`
	Status        string `json:"status"`
	SourceHost    string `json:"source_compute"`
	SourceNode    string `json:"source_node"`
	DestHost      string `json:"dest_compute,omitempty"`
	DestNode      string `json:"dest_node,omitempty"`
	OldFlavor     Flavor `json:"old_flavor"`
	NewFlavor     Flavor `json:"new_flavor"`
	// RequestedHost is the host the caller asked for (migrate with a
	// host, 2.56): the scheduler is pinned to it and no alternates are
	// kept, as Nova does for a forced host.
	RequestedHost string `json:"requested_host,omitempty"`
	// AllowSameHost says the source host may be the destination
	// (allow_resize_to_same_host, resizes only).
	AllowSameHost bool `json:"allow_same_host,omitempty"`
	// ForceHost says RequestedHost skips the scheduler's filters (a
	// live migration with force, 2.30 to 2.67, or an evacuation's, 2.29
	// to 2.67: Berth's forced host, as for a forced build),
	// and BlockMigration is the live migration's block_migration as
	// asked ("auto", "true" or "false"). Added without a version bump.
	ForceHost      bool   `json:"force_host,omitempty"`
	BlockMigration string `json:"block_migration,omitempty"`
	// DestAZ is the destination's availability zone as the scheduler's
	// Selection named it, which the server takes when it lands there
	// (Nova sets instance.availability_zone to the new host's zone on
	// every move); SourceAZ is the zone it had before, which a revert
	// gives back (Nova's revert_resize: the source host's zone). Added
	// without a version bump: absent (older records) leaves the zone
	// alone.
	DestAZ   string `json:"dest_availability_zone,omitempty"`
	SourceAZ string `json:"source_availability_zone,omitempty"`
	// AbortRequestID is the request that asked to abort a live
	// migration (DELETE /servers/{id}/migrations/{mid}); whoever works
	// the migration next rolls it back, ending it cancelled.
	AbortRequestID string `json:"abort_request_id,omitempty"`
	// ForceCompleteRequestID is the request that asked a running live
	// migration to complete now (POST .../migrations/{mid}/action
	// force_complete): the destination's driver stops waiting for the
	// guest to converge.
	ForceCompleteRequestID string `json:"force_complete_request_id,omitempty"`
	// Remaining are the alternate destinations the scheduler returned
	// (unclaimed), tried in order by the cell conductor when the
	// destination fails; MaxAttempts bounds the tries.
	Remaining   []Selection `json:"remaining,omitempty"`
	MaxAttempts int         `json:"max_attempts,omitempty"`
	// Attempts are the destinations tried so far, each failed one with
	// its reason.
	Attempts []Attempt `json:"attempts,omitempty"`
	// Error is why the move ended in error.
	Error string `json:"error,omitempty"`
	// The requests that started, confirmed and reverted it (Nova's
	// instance actions resize/migrate, confirmResize, revertResize),
	// when the confirm and revert were asked, and the steps done so far
	// (the actions' events).
	RequestID        string     `json:"request_id,omitempty"`
	ConfirmRequestID string     `json:"confirm_request_id,omitempty"`
	RevertRequestID  string     `json:"revert_request_id,omitempty"`
	ConfirmedAt      *time.Time `json:"confirmed_at,omitempty"`
	// AutoConfirmed says the scheduler leader confirmed it, its
	// resize_confirm_window over (Nova's periodic confirm, whose action
	// has no user). Added without a version bump: absent is false.
	AutoConfirmed bool        `json:"auto_confirmed,omitempty"`
	RevertedAt    *time.Time  `json:"reverted_at,omitempty"`
	Events        []MoveEvent `json:"events,omitempty"`
	CreatedAt     time.Time   `json:"created_at"`
	UpdatedAt     time.Time   `json:"updated_at"`
}

func (*Migration) SchemaVersion() int { return MigrationVersion }

// SetDestination names sel's host, node (the host when sel names none)
// and zone as m's destination.
func (m *Migration) SetDestination(sel Selection) {
	m.DestHost, m.DestNode, m.DestAZ = sel.ServiceHost, sel.Nodename, sel.AvailabilityZone
	if m.DestNode == "" {
		m.DestNode = sel.ServiceHost
	}
}

// LandOnDest puts in on m's destination: its host, node and zone, the
// zone it leaves kept on m for a revert. Every move's final write uses
// it, so the record's zone is always its host's.
func (m *Migration) LandOnDest(in *Instance) {
	in.Host, in.Node = m.DestHost, m.DestNode
	if m.DestAZ != "" {
		m.SourceAZ, in.AvailabilityZone = in.AvailabilityZone, m.DestAZ
	}
}

// LandOnSource puts in back on m's source (a revert), undoing
// LandOnDest's zone.
func (m *Migration) LandOnSource(in *Instance) {
	in.Host, in.Node = m.SourceHost, m.SourceNode
	if m.DestAZ != "" {
		in.AvailabilityZone = m.SourceAZ
	}
}

// MoveRequest asks the superconductors to schedule a migration: the
// cold-move counterpart of a BuildRequest, deleted by the hand-off that
// casts the move to its destination.
type MoveRequest struct {
	header
	InstanceUUID  string    `json:"instance_uuid"`
	Cell          string    `json:"cell"`
	MigrationUUID string    `json:"migration_uuid"`
	RequestID     string    `json:"request_id,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	// Kind is the move this schedules: "" for the cold moves (resize,
	// migration), else a MigrationType or MoveKindUnshelve, each worked
	// by its own handler in the superconductor. Added without a version
	// bump: absent means what every earlier request meant.
	Kind string `json:"kind,omitempty"`
}

func (*MoveRequest) SchemaVersion() int { return MoveRequestVersion }

// Move steps a cast carries (Build.Move), each worked by one host's
// agent; the host named is where the cast goes.
const (
	// MovePrep (destination): may the move land here? A failure is
	// retried on an alternate by the cell conductor.
	MovePrep = "prep"
	// MoveOut (source): stop the guest, keeping it for a revert.
	MoveOut = "out"
	// MoveFinish (destination): start the guest with the new flavor;
	// the server is VERIFY_RESIZE.
	MoveFinish = "finish"
	// MoveConfirm (source): drop the stopped guest and free the
	// source's allocation.
	MoveConfirm = "confirm"
	// MoveRevert (destination): destroy the new guest.
	MoveRevert = "revert"
	// MoveRevertFinish (source): give the instance its source
	// allocation back and start the guest again.
	MoveRevertFinish = "revert_finish"
)

// MoveStep is the move work in a cast (Build.Op == OpMove).
type MoveStep struct {
	MigrationUUID string `json:"migration_uuid"`
	Step          string `json:"step"`
	// Kind is the MoveRequest's kind ("" for the cold moves), so a
	// failed step's retry reaches its kind's handler in the cell
	// conductor. Added without a version bump, as MoveRequest.Kind.
	Kind string `json:"kind,omitempty"`
}

// MoveEvent is one step of a move as Nova's instance action events name
// it (conductor_migrate_server, compute_prep_resize, ...), where and
// when it ran and how it ended ("Success" or "Error" with the reason).
type MoveEvent struct {
	Event  string    `json:"event"`
	Host   string    `json:"host,omitempty"`
	Start  time.Time `json:"start"`
	Finish time.Time `json:"finish"`
	Result string    `json:"result"`
	Reason string    `json:"reason,omitempty"`
}

// Nova's event of each move step, and the superconductor's.
var moveStepEvents = map[string]string{
	MovePrep: "compute_prep_resize", MoveOut: "compute_resize_instance", MoveFinish: "compute_finish_resize",
	MoveConfirm: "compute_confirm_resize", MoveRevert: "compute_revert_resize",
	MoveRevertFinish: "compute_finish_revert_resize",
}

// EventScheduleMove is the superconductor's event (Nova's
// conductor_migrate_server).
const EventScheduleMove = "conductor_migrate_server"

// Done records that step (a move step, or EventScheduleMove) ran on
// host from start until now, with err its failure (nil: success).
func (m *Migration) Done(step, host string, start, now time.Time, err error) {
	name := step
	if e, ok := moveStepEvents[step]; ok {
		name = e
	}
	ev := MoveEvent{Event: name, Host: host, Start: start, Finish: now, Result: "Success"}
	if err != nil {
		ev.Result, ev.Reason = "Error", err.Error()
	}
	m.Events = append(m.Events, ev)
}
