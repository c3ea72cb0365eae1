package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-project/berth/etcdschema"
)

// Driver builds and destroys instances on a host. Adding one touches
// nothing but its own file and the registry below.
type Driver interface {
	// Spawn builds the instance; a *BuildError says whether another host
	// may succeed where this one failed.
	Spawn(ctx context.Context, b *etcdschema.Build) error
	// Destroy removes the instance; destroying an unknown one is no error.
	Destroy(ctx context.Context, uuid string) error
	// List returns the uuids the driver runs, for reconciliation.
	List(ctx context.Context) ([]string, error)
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
	Fake FakeConfig
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
