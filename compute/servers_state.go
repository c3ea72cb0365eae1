package compute

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
	"unicode"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

// serverState is one server as Nova's view reads an Instance object:
// from a BuildRequest (Nova's BuildRequest.get_new_instance: building,
// scheduling, no host) or from the Instance in its cell, with Berth's
// status words turned into Nova's vm_state, task_state and power_state.
type serverState struct {
	id, name           string
	projectID, userID  string
	vmState, taskState string // task "" is None
	powerState         int
	host, node         string
	cell               string // "" while a build request
	az                 string
	flavor             etcdschema.Flavor
	image              *etcdschema.BootImage
	metadata           map[string]string
	description        *string
	created, updated   time.Time
	launchedAt         *time.Time
	fault              *etcdschema.Fault
	reservationID      string
	launchIndex        int
	group              string
	attempts           []etcdschema.Attempt // the failed builds before the current one
	status             string               // Berth's word, for the instance actions
	requestID          string               // the create's
	deleteRequestID    string               // the accepted delete's, if any
	shelveActions      []etcdschema.ServerAction
}

// Nova's power states (nova/compute/power_state.py) Berth reaches.
const (
	powerNoState  = 0
	powerRunning  = 1
	powerShutdown = 4 // a shelved server's guest was powered off
)

// Nova's vm_states Berth reaches.
const (
	vmBuilding = "building"
	vmActive   = "active"
	vmError    = "error"
	vmDeleted  = "deleted"
	vmResized  = "resized"
	// A shelved server, on its host or offloaded.
	vmShelved          = "shelved"
	vmShelvedOffloaded = "shelved_offloaded"
)

func stateOf(v *servers.Server) *serverState {
	if br := v.BuildRequest; br != nil {
		s := &serverState{id: br.InstanceUUID, name: br.Name, projectID: br.ProjectID, userID: br.UserID,
			vmState: vmBuilding, taskState: etcdschema.TaskScheduling, powerState: powerNoState,
			az: br.AvailabilityZone, flavor: br.Flavor, image: br.Image, metadata: br.Metadata,
			description: br.Description, created: br.CreatedAt, updated: br.CreatedAt,
			reservationID: br.ReservationID, launchIndex: br.Index, group: br.Hints.Group,
			status: etcdschema.StatusBuild, requestID: br.RequestID}
		return s
	}
	in := v.Instance
	s := &serverState{id: in.UUID, name: in.Name, projectID: in.ProjectID, userID: in.UserID,
		taskState: in.TaskState, powerState: powerNoState, host: in.Host, node: in.Node, cell: in.Cell,
		az: in.AvailabilityZone, flavor: in.Flavor, image: in.Image, metadata: in.Metadata,
		description: in.Description, created: in.CreatedAt, updated: in.UpdatedAt, fault: in.Fault,
		reservationID: in.ReservationID, launchIndex: in.LaunchIndex, group: in.Group,
		attempts: in.FailedAttempts, status: in.Status, requestID: in.RequestID, deleteRequestID: in.DeleteRequestID,
		shelveActions: in.ShelveActions}
	switch in.Status {
	case etcdschema.StatusActive:
		s.vmState, s.powerState = vmActive, powerRunning
		// Berth keeps no launched_at: the instance's last update is its
		// launch until a delete updates it again.
		at := in.UpdatedAt
		s.launchedAt = &at
	case etcdschema.StatusVerifyResize:
		// Running on its destination, waiting for confirm or revert.
		s.vmState, s.powerState = vmResized, powerRunning
		at := in.UpdatedAt
		s.launchedAt = &at
	case etcdschema.StatusError:
		s.vmState = vmError
	case etcdschema.StatusDeleted:
		s.vmState = vmDeleted
	case etcdschema.StatusShelved:
		s.vmState, s.powerState = vmShelved, powerShutdown
	case etcdschema.StatusShelvedOffloaded:
		s.vmState, s.powerState = vmShelvedOffloaded, powerShutdown
	default:
		s.vmState = vmBuilding
	}
	if in.Host != "" && in.Node == "" {
		s.node = in.Host // one node a host, named as the host
	}
	return s
}

// stateMap is common._STATE_MAP: the status a vm_state shows, by
// task_state ("default": any other).
var stateMap = map[string]map[string]string{
	"active": {"default": "ACTIVE", "rebooting": "REBOOT", "reboot_pending": "REBOOT",
		"reboot_started": "REBOOT", "rebooting_hard": "HARD_REBOOT", "reboot_pending_hard": "HARD_REBOOT",
		"reboot_started_hard": "HARD_REBOOT", "updating_password": "PASSWORD", "rebuilding": "REBUILD",
		"rebuild_block_device_mapping": "REBUILD", "rebuild_spawning": "REBUILD", "migrating": "MIGRATING",
		"resize_prep": "RESIZE", "resize_migrating": "RESIZE", "resize_migrated": "RESIZE", "resize_finish": "RESIZE"},
	"building": {"default": "BUILD"},
	"stopped": {"default": "SHUTOFF", "resize_prep": "RESIZE", "resize_migrating": "RESIZE",
		"resize_migrated": "RESIZE", "resize_finish": "RESIZE", "rebuilding": "REBUILD",
		"rebuild_block_device_mapping": "REBUILD", "rebuild_spawning": "REBUILD"},
	"resized":           {"default": "VERIFY_RESIZE", "resize_reverting": "REVERT_RESIZE"},
	"paused":            {"default": "PAUSED", "migrating": "MIGRATING"},
	"suspended":         {"default": "SUSPENDED"},
	"rescued":           {"default": "RESCUE"},
	"error":             {"default": "ERROR", "rebuilding": "REBUILD", "rebuild_block_device_mapping": "REBUILD", "rebuild_spawning": "REBUILD"},
	"deleted":           {"default": "DELETED"},
	"soft-delete":       {"default": "SOFT_DELETED"},
	"shelved":           {"default": "SHELVED"},
	"shelved_offloaded": {"default": "SHELVED_OFFLOADED"},
}

// statusFromState is common.status_from_state.
func statusFromState(vm, task string) string {
	m, ok := stateMap[vm]
	if !ok {
		return "UNKNOWN"
	}
	if s, ok := m[task]; ok && task != "" {
		return s
	}
	return m["default"]
}

// statesFromStatuses is common.task_and_vm_state_from_status: the
// vm_states and task_states ("default" among them) whose status is one
// of statuses, compared without case.
func statesFromStatuses(statuses []string) (vm, task map[string]bool) {
	vm, task = map[string]bool{}, map[string]bool{}
	for state, byTask := range stateMap {
		for t, status := range byTask {
			for _, want := range statuses {
				if strings.EqualFold(status, want) {
					vm[state], task[t] = true, true
				}
			}
		}
	}
	return vm, task
}

// hostID is utils.generate_hostid: sha224 of project and host, "" for
// no host.
func hostID(host, project string) string {
	if host == "" {
		return ""
	}
	sum := sha256.Sum224([]byte(project + host))
	return hex.EncodeToString(sum[:])
}

// isotime is nova.utils.isotime: seconds, a "Z".
func isotime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// mysqlDatetime is a DATETIME column as MySQL's REGEXP reads it (the
// string a regex filter on created_at or launched_at matches).
func mysqlDatetime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") }

// instanceName is Nova's instance_name_template ("instance-%08x" of the
// database id). Berth has no integer id: the first eight hex digits of
// the uuid stand in; a BuildRequest (no id yet) shows "" as Nova's does.
func instanceName(s *serverState) string {
	if s.vmState == vmBuilding && s.host == "" && s.fault == nil {
		return ""
	}
	return "instance-" + strings.ReplaceAll(s.id, "-", "")[:8]
}

// hostname is utils.sanitize_hostname(display name, "Server-<uuid>"):
// characters past Latin-1 dropped, cut at 63, " ", "_" and "." as "-",
// only word characters and "-" kept, lower case, trimmed of "." and "-".
func hostname(name, id string) string {
	var latin []rune
	for _, r := range name {
		if r <= 0xff {
			latin = append(latin, r)
		}
	}
	if len(latin) > 63 {
		latin = latin[:63]
	}
	var b strings.Builder
	for _, r := range latin {
		switch {
		case r == ' ' || r == '_' || r == '.' || r == '-':
			b.WriteRune('-')
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		}
	}
	if h := strings.Trim(b.String(), ".-"); h != "" {
		return h
	}
	return "Server-" + id
}
