package etcdschema

// A live migration (Nova's os-migrateLive, LiveMigrationTask and the
// compute manager's live_migration family) moves a running server: the
// guest keeps running on its source until the destination runs it. Its
// Migration (MigrationType MigrationTypeLiveMigration) goes
//
//	accepted (the API; the superconductor holds its MoveRequest)
//	→ preparing (the destination's pre-check; a failure re-files the
//	  MoveRequest and the migration is accepted again, the superconductor
//	  trying the next host)
//	→ running (the destination starts the guest, then the source stops
//	  its own)
//	→ completed, or failed (rolled back: the server keeps running on its
//	  source), or error (no destination passed: it never left).
//
// The instance is ACTIVE with task_state TaskMigrating (the API's
// MIGRATING) from the API's accept until the migration ends.
const (
	MigrationAccepted  = "accepted"
	MigrationPreparing = "preparing"
	MigrationRunning   = "running"
)

// TaskMigrating is Nova's task_states.MIGRATING (a live migration).
const TaskMigrating = "migrating"

// The steps of a live migration (Build.Move.Step), each worked by one
// host's agent (agent/live_migrate.go).
const (
	// LiveCheck (destination, preparing): may the guest run here?
	// Nova's check_can_live_migrate_destination (and, asked from it, the
	// source's check). A failure goes back to the superconductor.
	LiveCheck = "live_check"
	// LiveStart (destination, running): start the guest here while the
	// source still runs it (pre_live_migration and the driver's
	// migration in).
	LiveStart = "live_start"
	// LiveOut (source, running): stop the source's guest and finish the
	// move (live_migration, post_live_migration): the source's
	// allocation freed, the server on the destination.
	LiveOut = "live_out"
	// LiveRollback (destination, running): the source could not hand
	// over; destroy the destination's guest and give the server its
	// source back (_rollback_live_migration).
	LiveRollback = "live_rollback"
)

// EventScheduleLive is the superconductor's event of a live migration
// (Nova's conductor_live_migrate_instance).
const EventScheduleLive = "conductor_live_migrate_instance"

func init() {
	// Nova's events of the live steps (the compute manager's
	// wrap_instance_event names).
	moveStepEvents[LiveCheck] = "compute_check_can_live_migrate_destination"
	moveStepEvents[LiveStart] = "compute_pre_live_migration"
	moveStepEvents[LiveOut] = "compute_live_migration"
	moveStepEvents[LiveRollback] = "compute_rollback_live_migration_at_destination"
}

// LiveAbortable says whether a live migration in status may still be
// aborted: Nova's running, and from 2.65 its queued and preparing
// (Berth's accepted is its queued: the request waits for a
// superconductor).
func LiveAbortable(status string, queuedToo bool) bool {
	switch status {
	case MigrationRunning:
		return true
	case MigrationAccepted, MigrationPreparing:
		return queuedToo
	}
	return false
}
