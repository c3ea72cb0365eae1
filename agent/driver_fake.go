package agent

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/backoff"
)

// FakeConfig makes the fake driver slow or unreliable on purpose, for labs
// and tests: builds take BuildTime, fail with probability FailureRate, or
// always when Fail is set.
type FakeConfig struct {
	BuildTime   time.Duration
	FailureRate float64
	Fail        bool
	// FailReschedulable makes failures reschedulable (the default in labs:
	// they exercise the retry path); false makes them final.
	FailReschedulable bool
	// The live migration's operations (driver_live.go): each takes
	// LiveMigrationTime; FailLiveCheck fails the destination's
	// pre-check (as Fail does), FailLiveStart the start on the
	// destination, FailLiveOut the source's hand-over (rolled back).
	LiveMigrationTime                         time.Duration
	FailLiveCheck, FailLiveStart, FailLiveOut bool
}

// FakeDriver "runs" instances as entries in memory.
type FakeDriver struct {
	host string
	cfg  FakeConfig
	mu   sync.Mutex
	run  map[string]bool
	// stopped are guests stopped for a move, kept for a revert.
	stopped map[string]bool
}

var (
	_ Driver       = (*FakeDriver)(nil)
	_ GuestResumer = (*FakeDriver)(nil)
	_ Mover        = (*FakeDriver)(nil)
)

// Resume brings back an instance after an agent restart. The fake
// driver's instances live only in the agent's memory, so every restart
// loses them all; like a hypervisor with resume_guests_state_on_host_boot
// it brings them back (at once, without build time or failures) rather
// than turning each restart of a lab's agent into a page of ERRORs.
func (d *FakeDriver) Resume(_ context.Context, b *etcdschema.Build) error {
	d.mu.Lock()
	d.run[b.InstanceUUID] = true
	d.mu.Unlock()
	return nil
}

func init() {
	RegisterDriver("fake", func(host string, cfg DriverConfig) (Driver, error) {
		return NewFakeDriver(host, cfg.Fake), nil
	})
}

// NewFakeDriver returns a fake driver for host.
func NewFakeDriver(host string, cfg FakeConfig) *FakeDriver {
	return &FakeDriver{host: host, cfg: cfg, run: map[string]bool{}, stopped: map[string]bool{}}
}

func (d *FakeDriver) Spawn(ctx context.Context, b *etcdschema.Build) error {
	if err := d.work(ctx, "build"); err != nil {
		return err
	}
	d.mu.Lock()
	d.run[b.InstanceUUID] = true
	d.mu.Unlock()
	return nil
}

// work takes BuildTime and fails as configured: a build, or a move's
// preparation on its destination.
func (d *FakeDriver) work(ctx context.Context, what string) error {
	if d.cfg.BuildTime > 0 {
		if !backoff.Sleep(ctx, d.cfg.BuildTime) {
			return ctx.Err()
		}
	}
	if d.cfg.Fail || (d.cfg.FailureRate > 0 && rand.Float64() < d.cfg.FailureRate) {
		return &BuildError{Reschedulable: d.cfg.FailReschedulable,
			Reason: fmt.Sprintf("fake driver on %s failed the %s (configured to fail)", d.host, what)}
	}
	return nil
}

func (d *FakeDriver) Destroy(_ context.Context, uuid string) error {
	d.mu.Lock()
	delete(d.run, uuid)
	delete(d.stopped, uuid)
	d.mu.Unlock()
	return nil
}

// PrepareMove takes the build time and fails as a build would.
func (d *FakeDriver) PrepareMove(ctx context.Context, _ *etcdschema.Build) error {
	return d.work(ctx, "move")
}

// StopForMove stops the guest, keeping it for a revert.
func (d *FakeDriver) StopForMove(_ context.Context, uuid string) error {
	d.mu.Lock()
	delete(d.run, uuid)
	d.stopped[uuid] = true
	d.mu.Unlock()
	return nil
}

// FinishMove starts the moved guest.
func (d *FakeDriver) FinishMove(_ context.Context, b *etcdschema.Build) error {
	d.mu.Lock()
	d.run[b.InstanceUUID] = true
	d.mu.Unlock()
	return nil
}

// ConfirmMove drops the stopped guest.
func (d *FakeDriver) ConfirmMove(_ context.Context, uuid string) error {
	d.mu.Lock()
	delete(d.stopped, uuid)
	d.mu.Unlock()
	return nil
}

// RevertMove starts the stopped guest again (or anew, after an agent
// restart lost it: the fake driver's guests live in memory).
func (d *FakeDriver) RevertMove(_ context.Context, b *etcdschema.Build) error {
	d.mu.Lock()
	delete(d.stopped, b.InstanceUUID)
	d.run[b.InstanceUUID] = true
	d.mu.Unlock()
	return nil
}

func (d *FakeDriver) List(context.Context) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]string, 0, len(d.run))
	for u := range d.run {
		out = append(out, u)
	}
	sort.Strings(out)
	return out, nil
}
