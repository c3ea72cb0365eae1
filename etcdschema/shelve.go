package etcdschema

import "time"

// Shelving (nova/compute/api.py shelve, shelve_offload, unshelve): a
// shelved server is stopped on its host, which keeps its allocation; a
// shelved-offloaded one has no host and no allocation, and an unshelve
// schedules it again (a MoveRequest of kind MoveKindUnshelve). Berth has
// no snapshots: the server's BootImage is what an unshelve spawns.

// Nova's statuses of a shelved server (vm_state shelved and
// shelved_offloaded).
const (
	StatusShelved          = "SHELVED"
	StatusShelvedOffloaded = "SHELVED_OFFLOADED"
)

// Nova's task states of shelving and unshelving (nova/compute/task_states.py).
const (
	TaskShelving                   = "shelving"
	TaskShelvingImagePendingUpload = "shelving_image_pending_upload"
	TaskShelvingImageUploading     = "shelving_image_uploading"
	TaskShelvingOffloading         = "shelving_offloading"
	TaskUnshelving                 = "unshelving"
	TaskPoweringOn                 = "powering-on"
)

// The shelve steps cast to a host (Build.Op OpMove, Build.Move.Step; no
// migration record: Move.MigrationUUID is empty), each worked by that
// host's agent against the instance record alone.
const (
	// StepShelve (the server's host): stop the guest; the server is
	// SHELVED, or goes on to StepShelveOffload at once when the API's
	// shelved_offload_time is 0 (Shelve.OffloadNow).
	StepShelve = "shelve_stop"
	// StepShelveOffload (the server's host): destroy the guest, free
	// the allocation and the host's instance info; SHELVED_OFFLOADED
	// with no host.
	StepShelveOffload = "shelve_offload"
	// StepUnshelveStart (the SHELVED server's host): start the guest
	// again; ACTIVE.
	StepUnshelveStart = "shelve_start"
	// StepUnshelveSpawn (the host the superconductor or the cell
	// conductor chose and claimed): spawn the offloaded server; ACTIVE,
	// or a retry on the next alternate.
	StepUnshelveSpawn = "shelve_spawn"
)

// Nova's instance action events of the shelve actions, and the
// superconductor's event of an unshelve (Nova's conductor reports
// schedule_instances).
const (
	EventShelve           = "compute_shelve_instance"
	EventShelveOffload    = "compute_shelve_offload_instance"
	EventUnshelve         = "compute_unshelve_instance"
	EventStartInstance    = "compute_start_instance"
	EventScheduleUnshelve = "schedule_instances"
)

// Nova's instance action names of the shelve actions.
const (
	ActionShelve        = "shelve"
	ActionShelveOffload = "shelveOffload"
	ActionUnshelve      = "unshelve"
)

// ShelveState is what a shelved server keeps (Nova's shelved_at,
// shelved_host system metadata, and the request spec of an unshelve).
type ShelveState struct {
	// OffloadNow: offload right after the guest stopped (the API's
	// shelved_offload_time 0), as Nova's _shelve_instance does.
	OffloadNow bool `json:"offload_now,omitempty"`
	// OffloadAfter is shelved_offload_time when it was positive: the
	// leader offloads the server that long after ShelvedAt.
	OffloadAfter time.Duration `json:"offload_after,omitempty"`
	ShelvedAt    *time.Time    `json:"shelved_at,omitempty"`
	ShelvedHost  string        `json:"shelved_host,omitempty"`
	// The unshelve of an offloaded server: the host asked for (2.91,
	// no alternates then), the alternates the scheduler returned
	// (unclaimed), the hosts tried with their reasons.
	RequestedHost string      `json:"requested_host,omitempty"`
	Remaining     []Selection `json:"remaining,omitempty"`
	MaxAttempts   int         `json:"max_attempts,omitempty"`
	Attempts      []Attempt   `json:"attempts,omitempty"`
}

// ServerAction is one of Nova's instance actions recorded on the
// instance (shelve, shelveOffload, unshelve): who asked, when, and the
// events of its steps as they ended.
type ServerAction struct {
	Action    string      `json:"action"`
	RequestID string      `json:"request_id"`
	Start     time.Time   `json:"start"`
	Events    []MoveEvent `json:"events,omitempty"`
}

// maxShelveActions bounds the actions an instance keeps: a server
// shelved and unshelved forever must not grow its record forever.
const maxShelveActions = 30

// StartAction records that action began (request requestID, at now).
func (in *Instance) StartAction(action, requestID string, now time.Time) {
	in.ShelveActions = append(in.ShelveActions, ServerAction{Action: action, RequestID: requestID, Start: now})
	if n := len(in.ShelveActions); n > maxShelveActions {
		in.ShelveActions = append([]ServerAction(nil), in.ShelveActions[n-maxShelveActions:]...)
	}
}

// ActionEvent records event of the latest action named action (any
// shelve action when action is ""): it ran on host from start until now,
// err its failure (nil: Success). Without such an action (a periodic
// offload), it starts one with requestID.
func (in *Instance) ActionEvent(action, requestID, event, host string, start, now time.Time, err error) {
	i := len(in.ShelveActions) - 1
	for ; i >= 0 && action != "" && in.ShelveActions[i].Action != action; i-- {
	}
	if i < 0 {
		in.StartAction(action, requestID, start)
		i = len(in.ShelveActions) - 1
	}
	ev := MoveEvent{Event: event, Host: host, Start: start, Finish: now, Result: "Success"}
	if err != nil {
		ev.Result, ev.Reason = "Error", err.Error()
	}
	in.ShelveActions[i].Events = append(in.ShelveActions[i].Events, ev)
}

// ShelvedOffload is the leader's due date of a shelved server's offload
// (shelved_offload_time > 0): an index, so the duty reads the few
// shelved servers rather than every instance.
type ShelvedOffload struct {
	header
	InstanceUUID string    `json:"instance_uuid"`
	Cell         string    `json:"cell"`
	Host         string    `json:"host"`
	Due          time.Time `json:"due"`
}

func (*ShelvedOffload) SchemaVersion() int { return ShelvedOffloadVersion }

// ShelvedOffloadVersion is ShelvedOffload's version.
const ShelvedOffloadVersion = 1
