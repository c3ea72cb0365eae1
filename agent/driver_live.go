package agent

import (
	"context"
	"fmt"

	"time"

	"github.com/berth-project/berth/etcdschema"
)

// LiveMover is implemented by drivers that can move a running guest
// (Nova's live migration), in Nova's order: the destination checks it
// can take the guest while the source runs it, then the destination
// starts the guest before the source stops its own, so the server never
// stops running. A driver without it cannot live-migrate: its agent
// says so on the service record (Service.CanLiveMigrate) and the API
// refuses with Nova's MigrationPreCheckError.
type LiveMover interface {
	// CheckLiveMigration checks on the destination that b can run here
	// (check_can_live_migrate_destination); a failure sends the
	// superconductor to the next host.
	CheckLiveMigration(ctx context.Context, b *etcdschema.Build) error
	// LiveMigrateIn starts the guest on the destination while the
	// source still runs it (pre_live_migration and the migration in).
	// force is closed when the operator asks the migration to complete
	// now (force_complete): a driver waiting for the guest to converge
	// stops waiting.
	LiveMigrateIn(ctx context.Context, b *etcdschema.Build, force <-chan struct{}) error
	// LiveMigrateOut stops the source's guest once the destination
	// runs it (the end of live_migration); a failure rolls back.
	LiveMigrateOut(ctx context.Context, uuid string) error
}

var (
	_ LiveMover = (*FakeDriver)(nil)
	_ LiveMover = (*ProcessDriver)(nil)
)

// canLiveMigrate says whether d can live-migrate.
func canLiveMigrate(d Driver) bool {
	_, ok := d.(LiveMover)
	return ok
}

// liveWork takes the live migration time and fails the operation what
// when fail (or the driver's Fail, FailureRate for the pre-check, as a
// build's), with a reschedulable BuildError as configured.
func (d *FakeDriver) liveWork(ctx context.Context, what string, fail bool, force <-chan struct{}) error {
	if d.cfg.LiveMigrationTime > 0 {
		t := time.NewTimer(d.cfg.LiveMigrationTime)
		defer t.Stop()
		select {
		case <-t.C:
		case <-force: // forced to complete: no more waiting
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return &BuildError{Reschedulable: true,
			Reason: fmt.Sprintf("fake driver on %s failed the %s (configured to fail)", d.host, what)}
	}
	return nil
}

// CheckLiveMigration fails as configured (FailLiveCheck, or every
// operation failing with Fail), else takes no time.
func (d *FakeDriver) CheckLiveMigration(ctx context.Context, _ *etcdschema.Build) error {
	if d.cfg.FailLiveCheck || d.cfg.Fail {
		return d.liveWork(ctx, "live migration pre-check", true, nil)
	}
	return nil
}

// LiveMigrateIn takes LiveMigrationTime (less when forced to
// complete), then runs the guest here.
func (d *FakeDriver) LiveMigrateIn(ctx context.Context, b *etcdschema.Build, force <-chan struct{}) error {
	if err := d.liveWork(ctx, "live migration", d.cfg.FailLiveStart, force); err != nil {
		return err
	}
	d.mu.Lock()
	d.run[b.InstanceUUID] = true
	d.mu.Unlock()
	return nil
}

// LiveMigrateOut stops the source's guest, unless FailLiveOut.
func (d *FakeDriver) LiveMigrateOut(ctx context.Context, uuid string) error {
	if d.cfg.FailLiveOut {
		return d.liveWork(ctx, "live migration hand-over", true, nil)
	}
	d.mu.Lock()
	delete(d.run, uuid)
	d.mu.Unlock()
	return nil
}

// CheckLiveMigration checks the guest's command can be made here (the
// flavor's berth:command or the configured default).
func (d *ProcessDriver) CheckLiveMigration(_ context.Context, b *etcdschema.Build) error {
	if _, err := d.command(b); err != nil {
		return &BuildError{Reschedulable: true, Reason: err.Error()}
	}
	return nil
}

// LiveMigrateIn starts the guest's process here; the source's keeps
// running until LiveMigrateOut on the source. A process has no memory
// to converge, so there is nothing for force to shorten.
func (d *ProcessDriver) LiveMigrateIn(ctx context.Context, b *etcdschema.Build, _ <-chan struct{}) error {
	return d.Spawn(ctx, b)
}

// LiveMigrateOut stops the source's process, the destination's running.
func (d *ProcessDriver) LiveMigrateOut(ctx context.Context, uuid string) error {
	return d.Destroy(ctx, uuid)
}
