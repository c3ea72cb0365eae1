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
}

// FakeDriver "runs" instances as entries in memory.
type FakeDriver struct {
	host string
	cfg  FakeConfig
	mu   sync.Mutex
	run  map[string]bool
}

var (
	_ Driver       = (*FakeDriver)(nil)
	_ GuestResumer = (*FakeDriver)(nil)
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
	return &FakeDriver{host: host, cfg: cfg, run: map[string]bool{}}
}

func (d *FakeDriver) Spawn(ctx context.Context, b *etcdschema.Build) error {
	if d.cfg.BuildTime > 0 {
		if !backoff.Sleep(ctx, d.cfg.BuildTime) {
			return ctx.Err()
		}
	}
	if d.cfg.Fail || (d.cfg.FailureRate > 0 && rand.Float64() < d.cfg.FailureRate) {
		return &BuildError{Reschedulable: d.cfg.FailReschedulable,
			Reason: fmt.Sprintf("fake driver on %s failed the build (configured to fail)", d.host)}
	}
	d.mu.Lock()
	d.run[b.InstanceUUID] = true
	d.mu.Unlock()
	return nil
}

func (d *FakeDriver) Destroy(_ context.Context, uuid string) error {
	d.mu.Lock()
	delete(d.run, uuid)
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
