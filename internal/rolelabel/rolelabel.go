// Package rolelabel tags the goroutines of each role of a Berth process
// with a pprof label, role=<name>, so one CPU profile of a process that
// runs many roles (berth dev, berth server, the load tool's single
// process with etcd, the API, the schedulers and a simulated fleet)
// says where the CPU goes by role:
//
//	go tool pprof -tags berth cpu.prof              # share per role
//	go tool pprof -tagfocus role=superconductor -top berth cpu.prof
//
// A goroutine inherits its creator's labels, so labelling the goroutine
// that starts a role labels everything the role starts: its workers, its
// watches' decoding, the HTTP connections a listener accepts, an
// embedded etcd's raft, apply and gRPC goroutines. Work done on a
// caller's goroutine counts for the caller: a call of the in-process
// scheduler is the superconductor's, a read through the in-process etcd
// client is its caller's (etcd's apply loop stays etcd's). Labels cost
// nothing when no profile is being taken beyond a map per goroutine
// start.
package rolelabel

import (
	"context"
	"runtime/pprof"
)

// Key is the label's key.
const Key = "role"

// Do runs f on the calling goroutine labelled role; goroutines f starts
// keep the label after f returns.
func Do(ctx context.Context, role string, f func(ctx context.Context)) {
	pprof.Do(ctx, pprof.Labels(Key, role), f)
}

// Go runs f on a new goroutine labelled role.
func Go(ctx context.Context, role string, f func(ctx context.Context)) {
	go Do(ctx, role, f)
}

// Of is the role label of ctx ("" when none): a goroutine's own label is
// not readable, only a context's.
func Of(ctx context.Context) string {
	v, _ := pprof.Label(ctx, Key)
	return v
}

// With is ctx carrying the role label role (ctx itself for ""), for work
// done on behalf of a role outside its goroutines: Of reads it back.
func With(ctx context.Context, role string) context.Context {
	if role == "" {
		return ctx
	}
	return pprof.WithLabels(ctx, pprof.Labels(Key, role))
}
