package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-project/berth/etcdschema"
)

// Driver builds and destroys instances on a host. Adding one touches
// nothing but its own file, which registers it by name (RegisterDriver in
// an init); a driver with settings also adds its part to DriverConfig and
// its block to configs. Optional behaviour comes through the small
// interfaces below, which the agent looks for.
type Driver interface {
	// Spawn builds the instance; a *BuildError says whether another host
	// may succeed where this one failed.
	Spawn(ctx context.Context, b *etcdschema.Build) error
	// Destroy removes the instance; destroying an unknown one is no error.
	Destroy(ctx context.Context, uuid string) error
	// List returns the uuids the driver runs, for reconciliation.
	List(ctx context.Context) ([]string, error)
}

// ExitNotifier is implemented by drivers whose instances can stop on their
// own (a process that exits, a VM that crashes). The agent registers a
// function that puts such an instance in ERROR with the reason.
type ExitNotifier interface {
	NotifyExit(func(uuid, reason string))
}

// GuestResumer is implemented by drivers that bring back, on agent start,
// instances they lost while the agent was down: Nova's
// resume_guests_state_on_host_boot. For drivers without it, an ACTIVE
// instance the driver does not run after a restart goes to ERROR (Nova's
// default sets it SHUTOFF; Berth has no SHUTOFF, and an operator must see
// it either way).
type GuestResumer interface {
	Resume(ctx context.Context, b *etcdschema.Build) error
}

// BuildError is a failed build with Nova's distinction: a reschedulable
// failure (RescheduledException) is retried on an alternate host, anything
// else puts the instance in ERROR at once.
type BuildError struct {
	Reschedulable bool
	Reason        string
}

func (e *BuildError) Error() string { return e.Reason }

// asBuildError classifies any error from Spawn: unexpected errors are
// reschedulable, as in Nova's _build_and_run_instance.
func asBuildError(err error) *BuildError {
	var be *BuildError
	if errors.As(err, &be) {
		return be
	}
	return &BuildError{Reschedulable: true, Reason: err.Error()}
}

// DriverFactory makes a driver for a host from its config.
type DriverFactory func(host string, cfg DriverConfig) (Driver, error)

// DriverConfig holds every driver's settings; each reads its own part.
type DriverConfig struct {
	Fake    FakeConfig
	Process ProcessConfig
}

var drivers = map[string]DriverFactory{}

// RegisterDriver makes a driver available by name.
func RegisterDriver(name string, f DriverFactory) { drivers[name] = f }

// NewDriver builds the named driver.
func NewDriver(name, host string, cfg DriverConfig) (Driver, error) {
	f, ok := drivers[name]
	if !ok {
		return nil, fmt.Errorf("unknown driver %q", name)
	}
	return f(host, cfg)
}
