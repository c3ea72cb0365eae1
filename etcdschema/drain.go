package etcdschema

import "time"

// HostDrainVersion is the version of the drain record (see values.go).
const HostDrainVersion = 1

// A drain's overall states. Draining is the only one the leader still
// starts moves for; the others are final (moves already in flight are
// still followed to their end, and a drain's cold moves confirmed).
const (
	DrainDraining = "draining"
	// DrainComplete: every server on the host moved away.
	DrainComplete = "complete"
	// DrainIncomplete: the deadline passed, or every server that could
	// move did and some could not; the instances say which and why.
	DrainIncomplete = "incomplete"
	// DrainCancelled: an operator cancelled it.
	DrainCancelled = "cancelled"
)

// The states of one server in a drain.
const (
	DrainWaiting = "waiting"
	DrainMoving  = "moving"
	DrainMoved   = "moved"
	DrainFailed  = "failed"
)

// HostDrain is an operator's drain of one host (berth host drain): the
// host is disabled, and the scheduler leader moves every server off it,
// at most Parallel at a time, until the Deadline. Everything the leader
// needs to resume after a change of leader is in this record and the
// migrations it names; the leader writes it fenced, the API creates and
// cancels it with a compare on its revision.
type HostDrain struct {
	header
	Host string `json:"host"`
	// Live moves with live migrations, else cold migrations (which the
	// drain confirms itself once finished).
	Live     bool `json:"live"`
	Parallel int  `json:"parallel"`
	// Deadline is when the drain stops starting moves and ends
	// incomplete (nil: none).
	Deadline *time.Time `json:"deadline,omitempty"`
	State    string     `json:"state"`
	// Error is why the drain ended other than by its servers (a live
	// drain this build cannot do).
	Error string `json:"error,omitempty"`
	// RequestID starts every move of the drain, so a new leader finds
	// the migrations its predecessor started before recording them.
	RequestID   string          `json:"request_id"`
	Instances   []DrainedServer `json:"instances"`
	RequestedAt time.Time       `json:"requested_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	// FinishedAt is when the state became final.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

func (*HostDrain) SchemaVersion() int { return HostDrainVersion }

// DrainedServer is one server's progress in a drain.
type DrainedServer struct {
	UUID  string `json:"uuid"`
	Cell  string `json:"cell,omitempty"`
	State string `json:"state"`
	// MigrationUUID is the move that took it (moving, moved, failed).
	MigrationUUID string `json:"migration_uuid,omitempty"`
	DestHost      string `json:"dest_host,omitempty"`
	// Reason is why it failed (from its migration, or why it could not
	// start one).
	Reason     string     `json:"reason,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// DrainFinal says whether a drain's state is final.
func DrainFinal(state string) bool { return state != DrainDraining }

// Counts counts the drain's servers by state.
func (d *HostDrain) Counts() map[string]int {
	out := map[string]int{DrainWaiting: 0, DrainMoving: 0, DrainMoved: 0, DrainFailed: 0}
	for _, s := range d.Instances {
		out[s.State]++
	}
	return out
}
