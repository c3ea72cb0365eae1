package etcdschema

// The evacuation (Nova's evacuate, a rebuild on another host of a server
// whose host is down): its migration statuses, task states, the one
// agent step and the instance action events, as Nova 26 names them.
// The flow is in servers/evacuate.go (API), conductor/evacuate.go
// (scheduling, retries on alternates) and agent/evacuate*.go (the
// rebuild on the destination, the stale copy on the source).

// MigrationAccepted is an evacuation's first status (Nova's API creates
// the migration "accepted"); it goes pre-migrating once a destination is
// claimed, done when the guest runs there, then completed when the
// source's agent has come back and destroyed its stale copy. A failed
// rebuild ends it failed, a scheduling failure error. (MigrationAccepted
// is shared with the live migration: live_migration.go.)

// Nova's task states of an evacuation: the API sets rebuilding, shown
// as status REBUILD.
const (
	TaskRebuilding      = "rebuilding"
	TaskRebuildSpawning = "rebuild_spawning"
)

// MoveEvacuateRebuild (destination) spawns the evacuated server's guest
// (Nova's rebuild_instance with recreate=True); a failure is retried on
// an alternate by the cell conductor.
const MoveEvacuateRebuild = "evacuate_rebuild"

// MoveEvacuateFreeSource (cell conductor) frees a done evacuation's
// source allocation (its migration's consumer). The destination's agent
// files it in the retry queue with the evacuation done, since an agent
// may write only its own host's provider and the conductor writes every
// provider of its cell.
const MoveEvacuateFreeSource = "evacuate_free_source"

// MoveEvacuateCleanup (source) destroys the stale copy of a done
// evacuation on a source whose agent is running (a host forced down
// with its agent alive); the cell conductor casts it with the source
// freed. A source whose agent was down does the same when it starts
// (its reconcile), and the cast then finds the evacuation completed.
const MoveEvacuateCleanup = "evacuate_cleanup"

// The instance action events of an evacuation (Nova's EventReporter
// names): the conductor's scheduling and the destination's rebuild.
const (
	EventEvacuateSchedule = "rebuild_server"
	EventEvacuateRebuild  = "compute_rebuild_instance"
)

// EvacuationHoldsSource says whether an evacuation in status may still
// have its server's guest on the source, so that a source agent that
// comes back must destroy its copy (Nova's _destroy_evacuated_instances
// filter: accepted, pre-migrating, done).
func EvacuationHoldsSource(status string) bool {
	switch status {
	case MigrationAccepted, MigrationPreMigrating, MigrationDone:
		return true
	}
	return false
}
