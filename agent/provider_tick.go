package agent

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/rawtxn"
)

// providerTick is the periodic provider sync: inventory and the disabled
// trait, the host's capacity report, then the host's cell mapping if it
// is still missing. Failures are logged; the next tick retries.
//
// What the three steps read before they decide to write (the service
// record, whether the host is mapped, the host's instance info uuids)
// is read in one read-only transaction first: at 10,000 hosts 168
// provider syncs a second each made five round trips to etcd, three of
// them these reads, and the round trips (gRPC on both sides) were most
// of the hosts' background CPU. The steps then act on those reads as
// they did on their own: every write still compares what it must
// (Placement's provider generation, the mapping's absence).
func (a *Agent) providerTick(ctx context.Context) (syncErr, mapErr error) {
	r, err := a.readTick(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("provider sync failed", "error", err)
		}
		return err, nil
	}
	if syncErr = r.svcErr; syncErr == nil {
		syncErr = a.syncProviderWith(ctx, r.svc)
	}
	if syncErr != nil && ctx.Err() == nil {
		a.log.Warn("provider sync failed", "error", syncErr)
	}
	if err := a.reportCapacityOf(ctx, r.uuids); err != nil && ctx.Err() == nil {
		a.log.Warn("capacity report failed", "error", err)
	}
	if !r.mapped {
		if mapErr = a.mapHost(ctx); mapErr != nil && ctx.Err() == nil {
			a.log.Warn("host mapping failed", "error", mapErr)
		}
	}
	return syncErr, mapErr
}

// tickReads is what a provider sync reads before it writes anything.
type tickReads struct {
	svc    etcdschema.Service
	svcErr error // no service record, or an unreadable one
	// mapped: the host is mapped (so its cell exists: hostMapped).
	mapped bool
	// uuids are the host's instance info uuids (track_instance_changes;
	// nil otherwise, and reportCapacityOf lists the cell).
	uuids []string
}

// readTick reads a provider sync's inputs. The host's own keys and its
// mapping come from its follow when that knows them; otherwise one
// read-only transaction:
// its compare is ensureHostMapping's look (hostMapped), and its success
// branch reads the service record and (with track_instance_changes) the
// host's instance info keys. It is built as etcd's messages (package rawtxn):
// clientv3's builders cloned each compare three times by reflection,
// most of a tick's client-side CPU.
//
// Why the failure branch is empty: with the same reads in both branches
// every tick of every host sent them twice and the member decoded them
// twice, for the rare tick of an unmapped host (a new host whose cell
// came later, a mapping an operator removed). That tick reads again
// without the compare: one round trip more, once, before mapHost maps
// the host.
func (a *Agent) readTick(ctx context.Context) (tickReads, error) {
	if r, mappingKnown, ok := a.follow.tickReads(a.cfg.Host, a.cfg.TrackInstanceChanges); ok {
		if mappingKnown {
			// All of it from the follow (host_follow.go): an idle
			// host's tick makes no round trip to etcd.
			return r, nil
		}
		// The service record and the instance info from the follow
		// (host_follow.go): only the mapping is read, the same compare
		// with nothing in either branch. That transaction cost the member
		// and client ~100 allocations and ~9 kB less than one with the
		// two reads (BenchmarkHostSyncs).
		resp, err := rawtxn.Commit(ctx, a.cli.KV, &pb.TxnRequest{Compare: a.own.hostMapped()})
		if err != nil {
			return tickReads{}, fmt.Errorf("agent %s: read host mapping: %w", a.cfg.Host, err)
		}
		r.mapped = resp.Succeeded
		return r, nil
	}
	svcKey := a.own.service
	reads := []*pb.RequestOp{rawtxn.Get(svcKey)}
	if a.cfg.TrackInstanceChanges {
		reads = append(reads, rawtxn.Range(&pb.RangeRequest{Key: []byte(a.own.instances),
			RangeEnd: rawtxn.PrefixEnd(a.own.instances), KeysOnly: true}))
	}
	resp, err := rawtxn.Commit(ctx, a.cli.KV, &pb.TxnRequest{Compare: a.own.hostMapped(), Success: reads})
	if err != nil {
		return tickReads{}, fmt.Errorf("agent %s: read service, host mapping and instance info: %w", a.cfg.Host, err)
	}
	r := tickReads{mapped: resp.Succeeded}
	if !r.mapped {
		if resp, err = rawtxn.Commit(ctx, a.cli.KV, &pb.TxnRequest{Success: reads}); err != nil {
			return tickReads{}, fmt.Errorf("agent %s: read service and instance info of an unmapped host: %w", a.cfg.Host, err)
		}
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 0 {
		r.svcErr = fmt.Errorf("agent %s: no service record", a.cfg.Host)
	} else {
		r.svcErr = etcdschema.Decode(svcKey, kvs[0].Value, &r.svc)
	}
	if a.cfg.TrackInstanceChanges {
		r.uuids = a.infoUUIDsOf(resp.Responses[1].GetResponseRange().Kvs)
	}
	return r, nil
}
