package stack

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/placement"
)

// What a harness that starts stacks in its own process (the load tool,
// tests) reads of them and does to them, beyond starting and stopping.

// Client is the stack's etcd client, shared by its roles.
func (s *Stack) Client() *clientv3.Client { return s.cli }

// InProcessClient is a new in-process client of the stack's embedded etcd
// member, for a harness's own reader (the load tool's recorder); the
// caller closes it before the stack stops.
func (s *Stack) InProcessClient() (*clientv3.Client, error) {
	if s.etcd == nil {
		return nil, errors.New("stack: an in-process client needs a stack with an embedded etcd member")
	}
	return s.etcd.NewClient(), nil
}

// EtcdMember is the stack's embedded etcd member (nil without one), for a
// harness that reads it directly in the same process: the load tool's
// recorder reads a measured phase's writes from its history afterwards,
// and follows the stages on one ordered watch stream.
func (s *Stack) EtcdMember() *embedetcd.Server { return s.etcd }

// Keys is the stack's etcd key layout (its config's prefix).
func (s *Stack) Keys() etcdschema.Keys { return s.keys }

// Metrics is the stack's registry, every role's figures.
func (s *Stack) Metrics() *metrics.Metrics { return s.metrics }

// Placement is the stack's placement service, nil before a role that
// claims or serves Placement has started.
func (s *Stack) Placement() *placement.Service { return s.placement }

// SchedulerID is the stack's scheduler's registration and election id,
// "" when it runs no scheduler.
func (s *Stack) SchedulerID() string { return s.schedID }

// Endpoint is the URL the stack serves name on ("compute API",
// "placement", "scheduler", "status", ...), "" when it does not.
func (s *Stack) Endpoint(name string) string {
	for _, ep := range s.Endpoints {
		if ep[0] == name {
			return ep[1]
		}
	}
	return ""
}

// WaitForRevision waits until the stack's placement index and host
// manager, those it runs, have seen etcd revision rev.
func (s *Stack) WaitForRevision(ctx context.Context, rev int64) error {
	if err := s.waitPlacement(ctx, rev); err != nil {
		return err
	}
	if s.hosts != nil {
		return s.hosts.WaitForRevision(ctx, rev)
	}
	return nil
}

// Crash stops a stack as a killed process would: its etcd client goes
// first, so nothing is resigned or revoked and its leases (election,
// registration, work-queue sessions) expire after their TTLs. Stop
// afterwards does nothing.
func (s *Stack) Crash() {
	s.stopOnce.Do(func() {}) // the crash is the stop: no graceful one later
	drained := make(chan struct{})
	go func() { // roles failing on the closed client must not block
		for {
			select {
			case <-s.errs:
			case <-drained:
				return
			}
		}
	}()
	for _, srv := range s.servers {
		_ = srv.Close()
	}
	_ = s.cli.Close()
	s.cancel()
	s.waitRoles("crashed stack's roles did not stop within 30s")
	close(drained)
	s.servers, s.ownCli = nil, false
}

// ConnectInProcess is a stack on its own in-process client of member's
// embedded etcd (no gRPC over loopback, as every role of member itself
// reaches it), closed when the stack stops or crashes, the member left
// running: the load tool's scheduler stacks in its own process.
func ConnectInProcess(cfg *configs.Config, log hclog.Logger, member *Stack) (*Stack, error) {
	if member.etcd == nil {
		return nil, errors.New("stack: an in-process client needs a stack with an embedded etcd member")
	}
	s := New(cfg, log)
	s.Attach(member.etcd.NewClient())
	s.ownCli = true
	return s, nil
}
