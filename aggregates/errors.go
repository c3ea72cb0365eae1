package aggregates

import (
	"errors"
	"fmt"
	"strings"
)

// The errors of the operations. Each API words them its own way (Nova's
// messages in package compute, Berth's in package api), so they carry
// what a message needs and say little themselves.
var (
	// ErrNotFound: no aggregate with that uuid.
	ErrNotFound = errors.New("aggregate not found")
	// ErrHostNotFound: the host never registered a compute service.
	ErrHostNotFound = errors.New("compute host not found")
	// ErrHostExists: the host is already in the aggregate.
	ErrHostExists = errors.New("host already in aggregate")
	// ErrHostNotInAggregate: remove_host of a host not in it.
	ErrHostNotInAggregate = errors.New("host not in aggregate")
	// ErrContention: other changes kept winning the race; try again.
	ErrContention = errors.New("aggregates kept changing")
)

// NameExistsError is a create or rename to a name another aggregate has.
type NameExistsError struct{ Name string }

func (e *NameExistsError) Error() string { return "aggregate " + e.Name + " already exists" }

// NotEmptyError refuses to delete an aggregate that still has hosts.
type NotEmptyError struct{ Hosts []string }

func (e *NotEmptyError) Error() string {
	return "aggregate still has hosts " + strings.Join(e.Hosts, ", ")
}

// ZoneConflictError is Nova's one-zone-per-host rule broken: Host would
// be in Zone while other aggregates already put it in Others (one entry
// per such aggregate, in aggregate id order, as Nova lists them).
type ZoneConflictError struct {
	Host, Zone string
	Others     []string
}

func (e *ZoneConflictError) Error() string {
	return fmt.Sprintf("host %s is already in availability zone(s) %s", e.Host, strings.Join(e.Others, ", "))
}

// ServersInZoneError refuses to change the zone of an aggregate whose
// host runs servers: they are recorded in the old zone.
type ServersInZoneError struct {
	Host    string
	Servers int64
}

func (e *ServersInZoneError) Error() string {
	return fmt.Sprintf("host %s runs %d server(s) in the current zone", e.Host, e.Servers)
}

// MirrorError is a change stored in the aggregate but not mirrored into
// placement; adding the host again (or a Sync) repairs it.
type MirrorError struct {
	Host string
	Err  error
}

func (e *MirrorError) Error() string {
	return "placement aggregates of host " + e.Host + " not updated: " + e.Err.Error()
}

func (e *MirrorError) Unwrap() error { return e.Err }
