package agent

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/informer"
)

// The methods below let a simulated fleet (berth bench) drive many hosts
// with the agent's own code, so the keys, values and transactions it
// writes are exactly a real agent's, without running each host's
// goroutines (an informer, a liveness ticker, periodic syncs and a
// service watch per host would be 100,000s of watches at scale). The
// fleet calls them in the order Run does: Register, PutAlive,
// SyncInstances, then Work for each cast it sees under the host's builds
// prefix. Start-up reconciliation and the service watch are not run.

// Register writes the service record, the compute node provider with its
// inventory, and the host mapping, as Run does first.
func (a *Agent) Register(ctx context.Context) error { return a.register(ctx) }

// PutAlive writes the host's alive key bound to lease, which the caller
// keeps alive (a fleet may share one lease among its hosts).
func (a *Agent) PutAlive(ctx context.Context, lease clientv3.LeaseID) error {
	return a.putAlive(ctx, lease)
}

// SyncInstances writes the host's instance uuid list (HostSync).
func (a *Agent) SyncInstances(ctx context.Context) error { return a.syncInstances(ctx) }

// Work works one cast (a put under Builds(host)) to its end, as Run's
// dispatcher does: build or destroy through the driver and the outcome
// transaction. The caller must not work two casts of one instance at once.
func (a *Agent) Work(ctx context.Context, ev informer.Event) { a.work1(ctx, ev) }
