package leader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/etcdschema/records"
	"github.com/berth-project/berth/internal/informer"
	"github.com/berth-project/berth/placement"
)

// DutyPlacement is what the leader's duties need of placement: consumer
// records read a page at a time, and guarded frees.
type DutyPlacement interface {
	ConsumerPage(ctx context.Context, after string, limit int) (page []placement.ConsumerRecord, next string, err error)
	DeleteAllocationsGuarded(ctx context.Context, consumer string, guards ...clientv3.Cmp) error
}

// Counter counts registered members of a role (superconductors).
type Counter interface{ Count() int }

// Hosts is what the duties need of the scheduler's host manager
// (scheduler.HostManager): its watch-fed view of which hosts are down and
// which instances each reports.
type Hosts interface {
	// DownHosts lists hosts with a service whose alive key is gone
	// (down), and hosts recorded down that are alive again (back).
	DownHosts() (down, back []string)
	// ReportsInstance says whether provider is a compute node's, and
	// whether its host reports instance.
	ReportsInstance(provider, instance string) (compute, reported bool)
}

// DutyConfig configures the leader's singleton duties.
type DutyConfig struct {
	Client    *clientv3.Client
	Keys      etcdschema.Keys
	Placement DutyPlacement
	Hosts     Hosts
	// Superconductors tells the stuck-request sweep whether anyone could
	// still pick a request up.
	Superconductors Counter
	ID              string
	// Interval is how often each duty runs while leading.
	Interval time.Duration
	// DownHostGrace is how long a host stays down (alive key gone) before
	// its pending casts are taken from it.
	DownHostGrace time.Duration
	// OrphanGrace is how old an allocation without an instance, or an
	// alternates list with nothing to retry, must be before it is freed.
	OrphanGrace time.Duration
	// OrphanSweepPage is how many consumers each run of the orphaned-
	// allocation sweep reads (0: DefaultOrphanSweepPage).
	OrphanSweepPage int
	// StuckBuildRequestTimeout is how long a BuildRequest may wait unleased
	// with no superconductor registered before it is buried in cell0.
	StuckBuildRequestTimeout time.Duration
	// ResizeConfirmWindow is Nova's resize_confirm_window: a resize
	// unconfirmed this long is confirmed through Confirmer
	// (auto_confirm.go). 0, or no Confirmer, confirms nothing.
	ResizeConfirmWindow time.Duration
	Confirmer           ResizeConfirmer
	Log                 hclog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

type duties struct {
	DutyConfig
	// orphanAfter is the consumer uuid the orphaned-allocation sweep's
	// next run reads after ("": from the first). Only that duty's
	// goroutine touches it.
	orphanAfter string
}

// Duties returns the duties DESIGN.md gives the leader: down-host
// handling, orphaned-allocation and stale-alternates clean-up, stuck
// build requests, and (with a resize_confirm_window) the automatic
// confirm of resizes. Each writes only through its term's Fence.
func Duties(c DutyConfig) []Duty {
	if c.Now == nil {
		c.Now = time.Now
	}
	d := &duties{DutyConfig: c}
	return append([]Duty{
		{Name: "down_hosts", Interval: c.Interval, Run: d.downHosts},
		{Name: "orphaned_allocations", Interval: c.Interval, Run: d.orphanedAllocations},
		{Name: "stale_alternates", Interval: c.Interval, Run: d.staleAlternates},
		{Name: "stuck_build_requests", Interval: c.Interval, Run: d.stuckBuildRequests},
	}, autoConfirmDuty(d)...)
}

// ---- down hosts ------------------------------------------------------------

// downHosts records hosts whose alive key is gone under /hosts/<h>/down
// (with the time first seen down, so a new leader does not restart the
// clock) and removes the record when the host is back. Once a host has
// been down for DownHostGrace, its pending casts are taken back: a build
// is rescheduled on the cell's alternates (a Retry, exactly as when the
// agent reports a reschedulable failure), a delete is done locally (as
// Nova deletes locally when the compute service is down).
func (d *duties) downHosts(ctx context.Context, f Fence) error {
	down, back := d.Hosts.DownHosts()
	for _, h := range back {
		_, err := f.Txn(ctx, d.Client,
			[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(d.Keys.Alive(h)), ">", 0)},
			clientv3.OpDelete(d.Keys.HostDown(h)))
		if err != nil {
			return fmt.Errorf("clear down record of %s: %w", h, err)
		}
		d.Log.Info("host is up again", "host", h)
	}
	for _, h := range down {
		if err := d.downHost(ctx, f, h); err != nil {
			return err
		}
	}
	return nil
}

func (d *duties) downHost(ctx context.Context, f Fence, host string) error {
	k := d.Keys
	aliveGone := clientv3.Compare(clientv3.CreateRevision(k.Alive(host)), "=", 0)
	resp, err := d.Client.Get(ctx, k.HostDown(host))
	if err != nil {
		return fmt.Errorf("read down record of %s: %w", host, err)
	}
	now := d.Now().UTC()
	if len(resp.Kvs) == 0 {
		rec := &etcdschema.HostDown{Host: host, Since: now, DetectedBy: d.ID}
		ok, err := f.Txn(ctx, d.Client,
			[]clientv3.Cmp{aliveGone, clientv3.Compare(clientv3.CreateRevision(k.HostDown(host)), "=", 0)},
			clientv3.OpPut(k.HostDown(host), etcdschema.MustEncode(rec)))
		if err != nil {
			return fmt.Errorf("record %s down: %w", host, err)
		}
		if ok {
			d.Log.Warn("host is down", "host", host)
		}
		return nil
	}
	var rec etcdschema.HostDown
	if err := etcdschema.Decode(k.HostDown(host), resp.Kvs[0].Value, &rec); err != nil {
		return err
	}
	if now.Sub(rec.Since) < d.DownHostGrace {
		return nil
	}
	casts, err := d.Client.Get(ctx, k.Builds(host), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("list casts to %s: %w", host, err)
	}
	for _, kv := range casts.Kvs {
		var b etcdschema.Build
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &b); err != nil {
			d.Log.Warn("leaving an unreadable cast to a down host", "host", host, "error", err)
			continue
		}
		castSame := clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)
		switch {
		case b.Op == etcdschema.OpDelete:
			err = d.localDelete(ctx, f, host, &b, string(kv.Key), castSame, aliveGone)
		case b.Op == etcdschema.OpMove:
			err = d.moveFromDown(ctx, f, host, &b, string(kv.Key), castSame, aliveGone)
		default:
			err = d.rescheduleFromDown(ctx, f, host, &b, string(kv.Key), castSame, aliveGone)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rescheduleFromDown files a Retry for a build cast to a down host. The
// cell conductor frees the claim on the down host before it claims an
// alternate, as it does for any retry.
func (d *duties) rescheduleFromDown(ctx context.Context, f Fence, host string, b *etcdschema.Build, castKey string, castSame, aliveGone clientv3.Cmp) error {
	k := d.Keys
	instKey := k.CellInstance(b.Cell, b.InstanceUUID)
	resp, err := d.Client.Get(ctx, instKey)
	if err != nil {
		return fmt.Errorf("read %s: %w", instKey, err)
	}
	if len(resp.Kvs) == 0 {
		// The instance is gone: the cast has nothing left to do.
		_, err := f.Txn(ctx, d.Client, []clientv3.Cmp{castSame}, clientv3.OpDelete(castKey))
		return err
	}
	var inst etcdschema.Instance
	if err := etcdschema.Decode(instKey, resp.Kvs[0].Value, &inst); err != nil {
		return err
	}
	now := d.Now().UTC()
	reason := fmt.Sprintf("host %s is down", host)
	// The retry carries the cast, its alternates with it, but not the
	// cast's copy of the instance: the cell conductor reads the record.
	rb := *b
	rb.Instance = nil
	retry := &etcdschema.Retry{InstanceUUID: b.InstanceUUID, Cell: b.Cell, FailedHost: host,
		Reason: reason, Build: rb, FiledAt: now}
	inst.Status, inst.TaskState, inst.Host, inst.Node, inst.UpdatedAt =
		etcdschema.StatusBuild, etcdschema.TaskScheduling, "", "", now
	ok, err := f.Txn(ctx, d.Client,
		[]clientv3.Cmp{castSame, aliveGone, clientv3.Compare(clientv3.ModRevision(instKey), "=", resp.Kvs[0].ModRevision)},
		clientv3.OpPut(instKey, etcdschema.MustEncode(&inst)),
		clientv3.OpPut(k.Retry(b.Cell, b.InstanceUUID), etcdschema.MustEncode(retry)),
		clientv3.OpDelete(castKey))
	if err != nil {
		return fmt.Errorf("reschedule %s from down host %s: %w", b.InstanceUUID, host, err)
	}
	if ok {
		d.Log.Warn("build cast to a down host rescheduled", "instance", b.InstanceUUID, "host", host)
	}
	return nil
}

// moveFromDown handles a move cast to a down host. A destination that
// went down before its prep is a failed destination: a Retry (the
// instance untouched, still on its source) lets the cell conductor try
// the migration's next alternate, freeing the down host's claim first.
// The later steps need that host (its guest, or the source's); they
// wait for it, and an operator sees the move in os-migrations.
func (d *duties) moveFromDown(ctx context.Context, f Fence, host string, b *etcdschema.Build, castKey string, castSame, aliveGone clientv3.Cmp) error {
	// An evacuation's rebuild and an unshelve's spawn are their
	// destination's first step, as prep is a cold move's: retried on the
	// next alternate too. Later steps wait for their host.
	first := b.Move != nil && (b.Move.Step == etcdschema.MovePrep ||
		b.Move.Step == etcdschema.MoveEvacuateRebuild || b.Move.Step == etcdschema.StepUnshelveSpawn)
	if !first {
		d.Log.Warn("move cast waits for its down host", "instance", b.InstanceUUID, "host", host)
		return nil
	}
	retry := &etcdschema.Retry{InstanceUUID: b.InstanceUUID, Cell: b.Cell, FailedHost: host,
		Reason: fmt.Sprintf("host %s is down", host), Build: *b, FiledAt: d.Now().UTC()}
	ok, err := f.Txn(ctx, d.Client, []clientv3.Cmp{castSame, aliveGone},
		clientv3.OpPut(d.Keys.Retry(b.Cell, b.InstanceUUID), etcdschema.MustEncode(retry)),
		clientv3.OpDelete(castKey))
	if err != nil {
		return fmt.Errorf("reschedule the move of %s from down host %s: %w", b.InstanceUUID, host, err)
	}
	if ok {
		d.Log.Warn("move to a down host rescheduled", "instance", b.InstanceUUID, "host", host)
	}
	return nil
}

// localDelete finishes a delete cast to a down host without its agent:
// free the claim, then delete every record and the cast in one fenced
// transaction (the agent's destroy minus the driver).
func (d *duties) localDelete(ctx context.Context, f Fence, host string, b *etcdschema.Build, castKey string, castSame, aliveGone clientv3.Cmp) error {
	consumers := []string{b.InstanceUUID}
	ops := append(records.DeleteInstance(d.Keys, b.Cell, host, b.InstanceUUID, b.ProjectID), clientv3.OpDelete(castKey))
	if b.Move != nil && b.Move.MigrationUUID != "" {
		// A move in flight (an evacuation from this down host, say): its
		// migration's consumer holds the source's allocation, and its
		// mapping kept the orphan sweep off it.
		consumers = append(consumers, b.Move.MigrationUUID)
		ops = append(ops, clientv3.OpDelete(d.Keys.MigrationMapping(b.Move.MigrationUUID)))
	}
	for _, consumer := range consumers {
		err := d.Placement.DeleteAllocationsGuarded(ctx, consumer, f.Cmp(), castSame, aliveGone)
		switch {
		case errors.Is(err, placement.ErrGuardFailed):
			return d.notLeaderOr(ctx, f)
		case err != nil && !errors.Is(err, placement.ErrNotFound):
			return fmt.Errorf("free allocations of %s: %w", consumer, err)
		}
	}
	ok, err := f.Txn(ctx, d.Client, []clientv3.Cmp{castSame, aliveGone}, ops...)
	if err != nil {
		return fmt.Errorf("delete %s on down host %s: %w", b.InstanceUUID, host, err)
	}
	if ok {
		d.Log.Warn("instance on a down host deleted locally", "instance", b.InstanceUUID, "host", host)
	}
	return nil
}

// notLeaderOr tells a failed fence apart from another failed guard.
func (d *duties) notLeaderOr(ctx context.Context, f Fence) error {
	resp, err := d.Client.Get(ctx, f.Key)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != f.Rev {
		return ErrNotLeader
	}
	return nil // the state changed under us; look again next sweep
}

// ---- orphaned allocations --------------------------------------------------

// DefaultOrphanSweepPage is how many consumers a run of the orphaned-
// allocation sweep reads when DutyConfig says none: at the default
// leader_interval (30 s) a million consumers are walked in 50 minutes,
// each run one range read of about 4 MB and tens of milliseconds of the
// member's CPU, and a cloud of up to this many consumers is walked whole
// in every run.
const DefaultOrphanSweepPage = 10000

// orphanedAllocations frees allocations on compute nodes whose consumer
// has no instance mapping (so no BuildRequest, no instance, no retry) and
// has not changed for OrphanGrace, as `nova-manage placement audit
// --delete` does. Consumers only on non-compute providers are left alone:
// they belong to Placement API users, not to Berth.
//
// Each run reads the next OrphanSweepPage consumer records from etcd
// (placement's ConsumerPage), from where the last run stopped, and wraps
// around at the end: a walk over every consumer takes as many runs as
// there are pages. Orphans come only from a writer that died between
// steps (Nova leaves them to an operator's audit), so minutes of delay
// cost nothing, while a sweep over the placement index's consumers made a
// leader list and hold every consumer (at 100,000 hosts × 1,000,000
// instances 3–4 s of its load and ~300 MB), and a sweep reading them all
// from etcd every run would read ~400 MB each interval.
func (d *duties) orphanedAllocations(ctx context.Context, f Fence) error {
	limit := d.OrphanSweepPage
	if limit <= 0 {
		limit = DefaultOrphanSweepPage
	}
	page, next, err := d.Placement.ConsumerPage(ctx, d.orphanAfter, limit)
	if err != nil {
		return err
	}
	d.orphanAfter = next
	now := d.Now()
	var cands []placement.ConsumerRecord
	for _, cr := range page {
		if now.Sub(cr.Consumer.UpdatedAt) < d.OrphanGrace {
			continue
		}
		onCompute, known := false, false
		for rp := range cr.Consumer.Allocations {
			// An instance its host reported is no orphan: no need to
			// look its mapping up.
			if onCompute, known = d.Hosts.ReportsInstance(rp, cr.Consumer.UUID); onCompute {
				break
			}
		}
		if onCompute && !known {
			cands = append(cands, cr)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	mapped, err := d.mappedAmong(ctx, cands)
	if err != nil {
		return err
	}
	freed := 0
	for _, cr := range cands {
		uuid := cr.Consumer.UUID
		if mapped[d.Keys.InstanceMapping(uuid)] || mapped[d.Keys.MigrationMapping(uuid)] {
			continue // an instance's, or a move's holding its source
		}
		err := d.Placement.DeleteAllocationsGuarded(ctx, uuid, f.Cmp(),
			clientv3.Compare(clientv3.CreateRevision(d.Keys.InstanceMapping(uuid)), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(d.Keys.MigrationMapping(uuid)), "=", 0),
			clientv3.Compare(clientv3.ModRevision(d.Keys.Consumer(uuid)), "=", cr.ModRev))
		switch {
		case err == nil:
			freed++
			d.Log.Warn("freed orphaned allocation", "consumer", uuid, "last_changed", cr.Consumer.UpdatedAt)
		case errors.Is(err, placement.ErrGuardFailed):
			if err := d.notLeaderOr(ctx, f); err != nil {
				return err
			}
		case errors.Is(err, placement.ErrNotFound):
		default:
			return fmt.Errorf("free orphaned allocation of %s: %w", uuid, err)
		}
	}
	if freed > 0 {
		d.Log.Info("orphaned allocations freed", "count", freed)
	}
	return nil
}

// mappedAmong returns which candidates' instance mappings exist: read one
// by one (batched in read transactions) when they are few, by listing every
// mapping key when they are many.
func (d *duties) mappedAmong(ctx context.Context, cands []placement.ConsumerRecord) (map[string]bool, error) {
	if len(cands) > 2000 {
		out, err := listKeys(ctx, d.Client, d.Keys.InstanceMappings())
		if err != nil {
			return nil, err
		}
		moves, err := listKeys(ctx, d.Client, d.Keys.MigrationMappings())
		maps.Copy(out, moves)
		return out, err
	}
	out := map[string]bool{}
	const batch = 50 // two reads each, within etcd's 128 operations a transaction
	for start := 0; start < len(cands); start += batch {
		end := min(start+batch, len(cands))
		ops := make([]clientv3.Op, 0, 2*(end-start))
		for _, cr := range cands[start:end] {
			ops = append(ops, clientv3.OpGet(d.Keys.InstanceMapping(cr.Consumer.UUID), clientv3.WithKeysOnly()),
				clientv3.OpGet(d.Keys.MigrationMapping(cr.Consumer.UUID), clientv3.WithKeysOnly()))
		}
		resp, err := d.Client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read instance mappings: %w", err)
		}
		for _, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				out[string(kv.Key)] = true
			}
		}
	}
	return out, nil
}

// listKeys returns the set of keys under prefix, read at one revision
// with the informer's list (streamed, the next chunk fetched while this one
// is gathered).
func listKeys(ctx context.Context, cli *clientv3.Client, prefix string) (map[string]bool, error) {
	out := map[string]bool{}
	_, err := informer.List(ctx, cli, prefix, 0, nil, func(page []informer.Event) error {
		for _, ev := range page {
			out[ev.Key] = true
		}
		return nil
	})
	return out, err
}

// ---- stale alternates ------------------------------------------------------

// staleAlternates deletes alternates lists no conductor will read: the
// instance is gone, or it is no longer building and no retry is pending.
// Berth now carries a build's alternates in its cast and writes no such
// key; the keys an older Berth wrote are still read (a retry, selection
// show) and deleted on ACTIVE, on destroy and by a retry, and this
// catches those left when an instance went to ERROR, or a writer died
// between steps.
func (d *duties) staleAlternates(ctx context.Context, f Fence) error {
	k := d.Keys
	type entry struct {
		key    string
		modRev int64
		alts   etcdschema.Alternates
	}
	var all []entry
	_, err := informer.List(ctx, d.Client, k.AlternatesPrefix(), 0, decodeAlternates, func(page []informer.Event) error {
		for _, ev := range page {
			if ev.DecodeErr != nil {
				d.Log.Warn("leaving unreadable alternates", "key", ev.Key, "error", ev.DecodeErr)
				continue
			}
			all = append(all, entry{ev.Key, ev.Revision, *ev.Decoded.(*etcdschema.Alternates)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	now := d.Now()
	for _, e := range all {
		last := time.Time{}
		for _, at := range e.alts.Attempts {
			if at.At.After(last) {
				last = at.At
			}
		}
		if now.Sub(last) < d.OrphanGrace {
			continue
		}
		uuid := e.alts.InstanceUUID
		mapKey, instKey, retryKey := k.InstanceMapping(uuid), k.CellInstance(e.alts.Cell, uuid), k.Retry(e.alts.Cell, uuid)
		resp, err := d.Client.Txn(ctx).Then(clientv3.OpGet(mapKey), clientv3.OpGet(instKey), clientv3.OpGet(retryKey)).Commit()
		if err != nil {
			return fmt.Errorf("read state of %s: %w", uuid, err)
		}
		mapKV := resp.Responses[0].GetResponseRange().Kvs
		instKV := resp.Responses[1].GetResponseRange().Kvs
		retryKV := resp.Responses[2].GetResponseRange().Kvs
		stale := len(mapKV) == 0 || len(instKV) == 0
		if !stale && len(retryKV) == 0 {
			var inst etcdschema.Instance
			if err := etcdschema.Decode(instKey, instKV[0].Value, &inst); err != nil {
				continue
			}
			stale = inst.Status != etcdschema.StatusBuild
		}
		if !stale {
			continue
		}
		ok, err := f.Txn(ctx, d.Client, []clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(e.key), "=", e.modRev),
			clientv3.Compare(clientv3.ModRevision(mapKey), "=", modRevOf(mapKV)),
			clientv3.Compare(clientv3.ModRevision(instKey), "=", modRevOf(instKV)),
			clientv3.Compare(clientv3.ModRevision(retryKey), "=", modRevOf(retryKV)),
		}, clientv3.OpDelete(e.key))
		if err != nil {
			return fmt.Errorf("delete stale alternates of %s: %w", uuid, err)
		}
		if ok {
			d.Log.Info("deleted stale alternates", "instance", uuid)
		}
	}
	return nil
}

// decodeAlternates is the list's decoder of alternates lists.
func decodeAlternates(key string, val []byte) (any, error) {
	var a etcdschema.Alternates
	if err := etcdschema.Decode(key, val, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

// modRevOf is the mod revision of a read key, 0 when it was absent (etcd
// compares a missing key's revisions as 0).
func modRevOf(kvs []*mvccpb.KeyValue) int64 {
	if len(kvs) == 0 {
		return 0
	}
	return kvs[0].ModRevision
}

// ---- stuck build requests --------------------------------------------------

// stuckBuildRequests buries in cell0 the BuildRequests that have waited
// unleased for StuckBuildRequestTimeout while no superconductor is
// registered: nobody will schedule them, and the user should see why
// rather than BUILD forever. With superconductors registered an unleased
// request is a backlog, not stuck, and is only logged.
func (d *duties) stuckBuildRequests(ctx context.Context, f Fence) error {
	k := d.Keys
	leased, err := listKeys(ctx, d.Client, k.BuildRequestLeases())
	if err != nil {
		return err
	}
	now := d.Now()
	type request struct {
		key    string
		modRev int64
		br     *etcdschema.BuildRequest
	}
	var stuck []request
	waiting := 0
	_, err = informer.List(ctx, d.Client, k.BuildRequests(), 0, decodeBuildRequest, func(page []informer.Event) error {
		for _, ev := range page {
			if ev.DecodeErr != nil {
				continue // the superconductor buries unreadable requests itself
			}
			br := ev.Decoded.(*etcdschema.BuildRequest)
			if leased[k.BuildRequestLease(br.InstanceUUID)] || now.Sub(br.CreatedAt) < d.StuckBuildRequestTimeout {
				continue
			}
			if d.Superconductors != nil && d.Superconductors.Count() > 0 {
				waiting++
				continue
			}
			stuck = append(stuck, request{ev.Key, ev.Revision, br})
		}
		return nil
	})
	if err != nil {
		return err
	}
	if waiting > 0 {
		d.Log.Warn("build requests waiting unleased past the stuck timeout; superconductors are registered, so this is a backlog",
			"count", waiting, "timeout", d.StuckBuildRequestTimeout)
	}
	for _, r := range stuck {
		if err := d.buryStuck(ctx, f, r.key, r.modRev, r.br); err != nil {
			return err
		}
	}
	return nil
}

// decodeBuildRequest is the list's decoder of build requests.
func decodeBuildRequest(key string, val []byte) (any, error) {
	var br etcdschema.BuildRequest
	if err := etcdschema.Decode(key, val, &br); err != nil {
		return nil, err
	}
	return &br, nil
}

func (d *duties) buryStuck(ctx context.Context, f Fence, key string, modRev int64, br *etcdschema.BuildRequest) error {
	k := d.Keys
	now := d.Now().UTC()
	reason := fmt.Sprintf("No superconductor scheduled this request within %s.", d.StuckBuildRequestTimeout)
	buryCmps, buryOps := records.BuryInCell0(k, br, reason, now)
	ok, err := f.Txn(ctx, d.Client, append([]clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(key), "=", modRev),
		clientv3.Compare(clientv3.CreateRevision(k.BuildRequestLease(br.InstanceUUID)), "=", 0),
	}, buryCmps...),
		append(buryOps, clientv3.OpDelete(key))...)
	if err != nil {
		return fmt.Errorf("bury stuck build request %s: %w", br.InstanceUUID, err)
	}
	if ok {
		d.Log.Warn("buried a stuck build request in cell0", "instance", br.InstanceUUID, "waited", now.Sub(br.CreatedAt))
	}
	return nil
}
