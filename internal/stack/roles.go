package stack

import (
	"context"
	"fmt"
)

// The processes' roles, one StartFunc each: what `berth server`,
// `berth conductor`, `berth agent` and `berth etcd` start once connected
// (`berth dev` is Dev's). Each reads its blocks from the stack's config,
// which configs.Config.Require has checked.

// Server starts the roles of `berth server` its config enables: the
// compute API, Placement, the scheduler, the superconductor and identity.
func Server(ctx context.Context, s *Stack) error {
	return s.StartServerRoles(ctx)
}

// Conductor starts the cell conductor of the config's conductor block.
func Conductor(ctx context.Context, s *Stack) error {
	return s.StartConductor(ctx, s.cfg.Conductor)
}

// Agent starts the agent of the config's agent block.
func Agent(ctx context.Context, s *Stack) error {
	return s.StartAgent(ctx, s.cfg.Agent, "")
}

// EtcdMember runs one etcd member and nothing else: the control plane's
// cluster, three or five of these, without a separately installed etcd.
// Connect has started the member; a member that loses its storage or is
// removed from the cluster stops serving, and the process must say so
// and exit.
func EtcdMember(ctx context.Context, s *Stack) error {
	go func() {
		if err, ok := <-s.etcd.Err(); ok && err != nil {
			s.errs <- fmt.Errorf("etcd member: %w", err)
		}
	}()
	return nil
}
