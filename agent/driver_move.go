package agent

import (
	"context"

	"github.com/berth-project/berth/etcdschema"
)

// Mover is implemented by drivers that move a guest between hosts
// themselves (resize, cold migration), in Nova's order: the destination
// is prepared while the source still runs (a failure there is retried on
// an alternate), then the source stops, then the destination starts;
// the stopped source is dropped on confirm or started again on revert.
// A driver without it moves with its plain operations (plainMover).
type Mover interface {
	// PrepareMove checks on the destination that b can land here
	// (Nova's prep_resize); a *BuildError says whether another host may
	// succeed.
	PrepareMove(ctx context.Context, b *etcdschema.Build) error
	// StopForMove stops the guest on the source, keeping what a revert
	// needs (Nova's migrate_disk_and_power_off).
	StopForMove(ctx context.Context, uuid string) error
	// FinishMove starts the guest on the destination with b.Flavor
	// (Nova's finish_migration).
	FinishMove(ctx context.Context, b *etcdschema.Build) error
	// ConfirmMove drops the stopped guest on the source (confirm_migration).
	ConfirmMove(ctx context.Context, uuid string) error
	// RevertMove starts the stopped guest on the source again with
	// b.Flavor, the old one (finish_revert_migration).
	RevertMove(ctx context.Context, b *etcdschema.Build) error
}

// moverOf is d's own Mover, or plainMover over its Spawn and Destroy.
func moverOf(d Driver) Mover {
	if m, ok := d.(Mover); ok {
		return m
	}
	return plainMover{d}
}

// MovePreparer is implemented by drivers without a Mover of their own
// that can still tell, on the destination, whether b will start there
// (the process driver: whether it has a command to run), so that a move
// that cannot finish is retried on an alternate before its source stops.
type MovePreparer interface {
	PrepareMove(ctx context.Context, b *etcdschema.Build) error
}

// plainMover moves a guest that has no state worth keeping (the process
// driver's command): the source's guest is destroyed when it stops and
// spawned again on a revert, the destination's spawned when it finishes.
type plainMover struct{ d Driver }

func (m plainMover) PrepareMove(ctx context.Context, b *etcdschema.Build) error {
	if p, ok := m.d.(MovePreparer); ok {
		return p.PrepareMove(ctx, b)
	}
	return nil
}
func (m plainMover) StopForMove(ctx context.Context, uuid string) error {
	return m.d.Destroy(ctx, uuid)
}
func (m plainMover) FinishMove(ctx context.Context, b *etcdschema.Build) error {
	return m.d.Spawn(ctx, b)
}
func (plainMover) ConfirmMove(context.Context, string) error { return nil }
func (m plainMover) RevertMove(ctx context.Context, b *etcdschema.Build) error {
	return m.d.Spawn(ctx, b)
}
