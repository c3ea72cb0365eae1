package agent

import (
	"context"
	"errors"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/informer"
)

// The methods below let a simulated fleet (berth bench) drive many hosts
// with the agent's own code, so the keys, values and transactions it
// writes are exactly a real agent's, without running each host's
// goroutines (an informer, a liveness ticker, periodic syncs and a
// service watch per host would be 100,000s of watches at scale). The
// fleet calls them in the order Run does: Register, GrantAlive (or
// PutAlive under a lease of its own), SyncInstances, then Work for each
// cast it sees under the host's builds prefix; and on the agent's own
// schedule (Intervals) RenewAlive, SyncProvider and SyncInstances, the
// bodies of Run's liveness ticker and periodic tasks. Start-up
// reconciliation and the service watch are not run. An agent built with
// Config.Fed has none of Run's watches, and cannot Run.

// Register creates the compute node provider with its inventory and the
// host mapping, and reads the service record, as Run does first. The host
// is not up yet: GrantAlive or PutAlive makes it up.
func (a *Agent) Register(ctx context.Context) error { return a.register(ctx) }

// GrantAlive grants the host's liveness lease (TTL service_down_time) and
// makes the host up under it, as Run does before it serves: the service
// record and the alive key in one transaction. The caller renews the
// lease with RenewAlive every report_interval.
func (a *Agent) GrantAlive(ctx context.Context) (clientv3.LeaseID, error) { return a.grantUp(ctx) }

// RenewAlive is one beat of Run's liveness ticker: one renewal of lease
// on r's keepalive stream (a fleet shares one renewer among its hosts, as
// its hosts share a client), and if etcd answers that the lease is gone a
// new lease with the alive key written again under it. It returns the
// lease in use afterwards (lease itself unless it was lost).
func (a *Agent) RenewAlive(ctx context.Context, r *LeaseRenewer, lease clientv3.LeaseID) (clientv3.LeaseID, error) {
	return a.renewAlive(ctx, r, lease)
}

// RenewedAlive is the rest of RenewAlive for a beat whose renewal the
// caller sent itself with r.RenewAsync (a fleet beating thousands of
// times a second holds no goroutine per beat): given the renewal's error,
// it grants a new lease and writes the alive key again when the lease was
// lost, and returns the lease in use afterwards, as RenewAlive does. It
// calls etcd only when the lease was lost: the caller runs it off the
// renewer's goroutine then.
func (a *Agent) RenewedAlive(ctx context.Context, lease clientv3.LeaseID, renewErr error) (clientv3.LeaseID, error) {
	return a.renewedAlive(ctx, lease, renewErr)
}

// SyncProvider is one run of the periodic provider sync (inventory, the
// disabled trait, the host's cell mapping). Failures are logged as Run
// logs them and returned.
func (a *Agent) SyncProvider(ctx context.Context) error {
	return errors.Join(a.providerTick(ctx))
}

// Intervals are the agent's periodic settings after New's defaults.
type Intervals struct {
	ReportInterval, ServiceDownTime, ProviderSyncInterval, InstanceSyncInterval time.Duration
}

// RenewTimeout is how long a liveness beat waits for etcd's answer: as
// long as the lease can still be alive. It was renewed one
// report_interval ago at best, so it expires at most service_down_time
// less report_interval after the beat starts; past that an answer only
// says the lease is gone. At least one report_interval. A slow etcd that
// answers within it keeps the host up, as KeepAliveOnce with no bound
// did.
func (i Intervals) RenewTimeout() time.Duration {
	return max(i.ReportInterval, i.ServiceDownTime-i.ReportInterval)
}

// Intervals returns the periods Run keeps: liveness every ReportInterval
// (lease TTL ServiceDownTime), provider sync every ProviderSyncInterval,
// instance sync every InstanceSyncInterval.
func (a *Agent) Intervals() Intervals {
	return Intervals{ReportInterval: a.cfg.ReportInterval, ServiceDownTime: a.cfg.ServiceDownTime,
		ProviderSyncInterval: a.cfg.ProviderSyncInterval, InstanceSyncInterval: a.cfg.InstanceSyncInterval}
}

// PutAlive makes the host up under lease, which the caller keeps alive
// (a fleet may share one lease among its hosts): the service record and
// the alive key in one transaction, as GrantAlive.
func (a *Agent) PutAlive(ctx context.Context, lease clientv3.LeaseID) error {
	return a.goUp(ctx, lease)
}

// SyncInstances writes the host's instance uuid list (HostSync) when it
// changed or is due for its periodic rewrite, and says whether it wrote.
func (a *Agent) SyncInstances(ctx context.Context) (wrote bool, err error) {
	return a.syncInstances(ctx)
}

// Work works one cast (a put under Builds(host)) to its end, as Run's
// dispatcher does: build or destroy through the driver and the outcome
// transaction. The caller must not work two casts of one instance at once.
func (a *Agent) Work(ctx context.Context, ev informer.Event) { a.work1(ctx, ev) }

// Follow hands the agent a change of its own host's service record or
// instance info (Keys.HostInstancesToService), or of its host mapping
// (Keys.HostMapping), from a watch the caller runs for many hosts, as a
// fleet watches its hosts' keys on one watch where each real agent
// watches its own: the agent's follow (host_follow.go), which its
// periodic syncs answer from. Other keys are ignored. The caller's watch
// must have started before the host registered, and the host's mapping
// as it was then must have been handed over first (FollowWatched).
func (a *Agent) Follow(key string, value []byte, deleted bool) {
	// An unreadable record is kept as the syncs' error, and logged there.
	_, _ = a.follow.apply(a.own, informer.Event{Key: key, Value: value, Deleted: deleted})
}

// FollowWatched marks the agent's follow as known: the caller feeds it
// (Follow) from a watch that started before the host registered, so it
// sees every change of the followed keys, and has handed it the host's
// mapping if one existed when the watch started (a host registered
// before: its registration writes no mapping again). Until the host's
// service record arrives the syncs still read etcd.
func (a *Agent) FollowWatched() {
	a.follow.setSynced()
	a.follow.setMappingSynced()
}
