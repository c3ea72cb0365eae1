package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/rawtxn"
	"github.com/berth-project/berth/placement"
)

// register creates the compute node provider and reports its inventory
// (with the disabled trait the service record, if any, asks for), reports
// the host's capacity, and maps the host to its cell when the cell is
// known. It reads the service record but does not write it: the record
// appears, or is brought up to date, in goUp's one transaction with the
// alive key. A host is "up" (service record and alive key) only when both
// exist, so it is never up before its provider and mapping exist (tests,
// e2e and `berth dev` users create servers as soon as hosts read up), and
// a new host's record never shows without its alive key, which the
// scheduler leader took for a host gone down (at 100,000 hosts, 35 false
// "host is down" during a populate).
func (a *Agent) register(ctx context.Context) error {
	s, rev, err := a.readService(ctx)
	if err != nil {
		return err
	}
	// The record just read has the current failed_builds: the agent is
	// its only writer (the API and goUp keep it) and builds only once up,
	// so the first build's success needs no read of it (noteBuildResult).
	a.failedMu.Lock()
	a.failedBuilds = s.FailedBuilds
	a.failedMu.Unlock()
	a.upMu.Lock()
	a.readAtRegister = &serviceRead{svc: s, rev: rev}
	a.upMu.Unlock()
	if err := a.placement.EnsureProvider(ctx, a.provider, a.cfg.Host, ""); err != nil {
		return fmt.Errorf("agent %s: ensure provider: %w", a.cfg.Host, err)
	}
	// A host without a record yet is enabled: Nova creates a compute
	// service enabled.
	if err := a.syncProviderWith(ctx, s); err != nil {
		return err
	}
	if err := a.reportCapacity(ctx); err != nil {
		a.log.Warn("capacity report failed", "error", err)
	}
	if err := a.ensureHostMapping(ctx); err != nil {
		a.log.Warn("host not mapped to a cell yet", "error", err)
	}
	return nil
}

// serviceRead is the service record as read, with its mod revision (0:
// there is none).
type serviceRead struct {
	svc etcdschema.Service
	rev int64
}

// readService reads the service record; with none it returns a new one
// (created now) and revision 0.
func (a *Agent) readService(ctx context.Context) (etcdschema.Service, int64, error) {
	key := a.own.service
	resp, err := a.cli.Get(ctx, key)
	if err != nil {
		return etcdschema.Service{}, 0, fmt.Errorf("agent %s: read service: %w", a.cfg.Host, err)
	}
	s := etcdschema.Service{Host: a.cfg.Host, CreatedAt: time.Now().UTC()}
	if len(resp.Kvs) == 0 {
		return s, 0, nil
	}
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &s); err != nil {
		return etcdschema.Service{}, 0, fmt.Errorf("agent %s: %w", a.cfg.Host, err)
	}
	return s, resp.Kvs[0].ModRevision, nil
}

// registered sets the fields of the service record the agent owns at
// start; the API's (disabled, its reason, forced_down) and
// failed_builds are kept.
func (a *Agent) registered(s *etcdschema.Service) {
	s.Cell = a.cfg.Cell
	s.ProviderUUID = a.provider
	s.AgentVersion = Version
	s.CanLiveMigrate = canLiveMigrate(a.driver)
}

// goUp makes the host up: in one transaction it writes the alive key
// under lease and the service record (created, or updated with the
// agent's fields when they differ), compared on the record's mod
// revision as the API writes its disabled fields. Run calls it after
// register and reconcile, as Nova's Service.start runs init_host before
// it creates or updates the service record and joins the service group:
// a host reads up once etcd and its driver agree, and casts are worked
// only from then on.
//
// On a restart the record exists and the host reads down (its alive key
// expired with the old lease, or was revoked) until this transaction;
// the leader may meanwhile have recorded it down, and it clears that
// record when it sees the alive key back. Its take-back of casts
// compares the alive key's absence, so none is taken once this commits.
func (a *Agent) goUp(ctx context.Context, lease clientv3.LeaseID) error {
	a.upMu.Lock()
	read := a.readAtRegister
	a.readAtRegister = nil // only for the first try: the record moves on
	a.upMu.Unlock()
	key, val := a.alive(lease)
	return a.writeService(ctx, read, a.registered, clientv3.OpPut(key, val, clientv3.WithLease(lease)))
}

// updateService read-modify-writes the service record with a compare on
// its mod revision: the API writes the disabled fields of the same record.
func (a *Agent) updateService(ctx context.Context, mutate func(s *etcdschema.Service)) error {
	return a.writeService(ctx, nil, mutate)
}

// writeService is updateService starting from read (the record as last
// read; nil reads it) and writing also in the same transaction: with
// also the transaction commits even when the record is unchanged, and
// also is written only if the record has not changed since read.
func (a *Agent) writeService(ctx context.Context, read *serviceRead, mutate func(s *etcdschema.Service), also ...clientv3.Op) error {
	key := a.own.service
	for try := 0; try < 20; try++ {
		if read == nil {
			s, rev, err := a.readService(ctx)
			if err != nil {
				return err
			}
			read = &serviceRead{svc: s, rev: rev}
		}
		s := read.svc
		mutate(&s)
		ops := also
		if read.rev == 0 || s != read.svc {
			s.UpdatedAt = time.Now().UTC()
			ops = append(slices.Clip(also), clientv3.OpPut(key, etcdschema.MustEncode(&s)))
		}
		if len(ops) == 0 {
			return nil // nothing to write
		}
		t, err := a.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", read.rev)).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("agent %s: write service: %w", a.cfg.Host, err)
		}
		if t.Succeeded {
			return nil
		}
		read = nil
	}
	return fmt.Errorf("agent %s: service record kept changing under us", a.cfg.Host)
}

// service reads the current service record; none is an error.
func (a *Agent) service(ctx context.Context) (etcdschema.Service, error) {
	s, rev, err := a.readService(ctx)
	if err == nil && rev == 0 {
		err = fmt.Errorf("agent %s: no service record", a.cfg.Host)
	}
	return s, err
}

// inventories computes what the host reports, detecting sizes not set.
func (a *Agent) inventories() (map[string]etcdschema.Inventory, error) {
	inv := a.cfg.Inventory
	var err error
	if inv.VCPUs == 0 {
		inv.VCPUs = detectVCPUs()
	}
	if inv.MemoryMB == 0 {
		if inv.MemoryMB, err = detectMemoryMB(); err != nil {
			return nil, err
		}
	}
	if inv.DiskGB == 0 {
		dir := a.cfg.DataDir
		if dir == "" {
			dir = "/"
		}
		if inv.DiskGB, err = detectDiskGB(dir); err != nil {
			return nil, err
		}
	}
	ratio := func(r, def float64) float64 {
		if r <= 0 {
			return def
		}
		return r
	}
	mk := func(total, reserved int64, r float64) etcdschema.Inventory {
		return etcdschema.Inventory{Total: total, Reserved: reserved, MinUnit: 1, MaxUnit: total,
			StepSize: 1, AllocationRatio: r}
	}
	out := map[string]etcdschema.Inventory{
		placement.VCPU:     mk(inv.VCPUs, inv.ReservedHostCPUs, ratio(inv.CPUAllocationRatio, 4.0)),
		placement.MemoryMB: mk(inv.MemoryMB, inv.ReservedHostMemoryMB, ratio(inv.RAMAllocationRatio, 1.0)),
	}
	if inv.DiskGB > 0 {
		out[placement.DiskGB] = mk(inv.DiskGB, inv.ReservedHostDiskGB, ratio(inv.DiskAllocationRatio, 1.0))
	}
	return out, nil
}

// syncProvider is update_provider_tree: it reports inventory and sets or
// clears COMPUTE_STATUS_DISABLED from the service record. It writes only
// when something differs, so the periodic run costs two reads when idle:
// a write would bump the provider's generation and race every claim on
// the host (claims compare the provider's revision), 1/60 of a fleet's
// hosts each second at the default interval.
func (a *Agent) syncProvider(ctx context.Context) error {
	svc, err := a.service(ctx)
	if err != nil {
		return err
	}
	return a.syncProviderWith(ctx, svc)
}

// syncProviderWith is syncProvider with the service record already read.
// A provider seen as wanted within its refresh is not read again
// (provider_cache.go).
func (a *Agent) syncProviderWith(ctx context.Context, svc etcdschema.Service) error {
	inv, err := a.inventories()
	if err != nil {
		return err
	}
	if a.providerIsAsSeen(inv, svc.Disabled) {
		return nil
	}
	update := func(p *etcdschema.Provider) error {
		same := maps.Equal(p.Inventories, inv)
		p.Inventories = inv
		has := slices.Contains(p.Traits, placement.TraitComputeStatusDisabled)
		switch {
		case svc.Disabled && !has:
			p.Traits = append(p.Traits, placement.TraitComputeStatusDisabled)
		case !svc.Disabled && has:
			p.Traits = slices.DeleteFunc(p.Traits, func(t string) bool { return t == placement.TraitComputeStatusDisabled })
		default:
			if same {
				return errProviderUnchanged
			}
		}
		return nil
	}
	err = a.placement.UpdateProvider(ctx, a.provider, update)
	if errors.Is(err, placement.ErrProviderNotFound) {
		// Placement lost the provider (emptied during an upgrade, or
		// deleted by an operator): create it again, as Nova's report
		// client does, so claims on this host can land again (the
		// scheduler's empty-Placement fallback waits for it).
		a.log.Info("resource provider missing; creating it again", "provider", a.provider)
		if err := a.placement.EnsureProvider(ctx, a.provider, a.cfg.Host, ""); err != nil {
			return fmt.Errorf("agent %s: re-create provider: %w", a.cfg.Host, err)
		}
		err = a.placement.UpdateProvider(ctx, a.provider, update)
	}
	if err == nil || errors.Is(err, errProviderUnchanged) {
		a.sawProvider(inv, svc.Disabled)
		return nil
	}
	a.sawProvider(nil, false)
	return err
}

// errProviderUnchanged stops UpdateProvider from writing a provider that
// already reports what the host has.
var errProviderUnchanged = errors.New("provider unchanged")

// ensureHostMapping maps the host to its cell when the cell exists and the
// host is not mapped yet (Nova's discover_hosts for one host).
//
// It looks first with a read-only transaction and writes only when the
// mapping is missing: a transaction that may write goes through raft and
// the WAL even when its compare fails, and every provider sync of every
// host checks its mapping (at 10,000 hosts, ~170 such proposals a
// second that wrote nothing). A read costs etcd a read index, no entry.
func (a *Agent) ensureHostMapping(ctx context.Context) error {
	look, err := rawtxn.Commit(ctx, a.cli.KV, &pb.TxnRequest{Compare: a.own.hostMapped()})
	if err != nil {
		return fmt.Errorf("map host %s to cell %s: look up the mapping: %w", a.cfg.Host, a.cfg.Cell, err)
	}
	if look.Succeeded {
		return nil // mapped, in a cell that exists
	}
	return a.mapHost(ctx)
}

// hostMapped holds when the agent's host is mapped, and so its cell
// exists: a mapping is written only while its cell exists (mapHost here,
// discover_hosts in the API, both comparing the cell's presence), and a
// cell is never deleted. Why not compare the cell too: etcd evaluates a
// compare as a full range, reading the key's value from bolt and decoding
// it, and every provider sync of every host carries this compare (1,700
// a second at 100,000 hosts) to learn what the mapping already says.
func (o ownKeys) hostMapped() []*pb.Compare {
	return []*pb.Compare{rawtxn.Present(o.mapping)}
}

// mapHost writes the host's mapping if it is missing and its cell exists
// (ensureHostMapping's write, after a look found it unmapped).
func (a *Agent) mapHost(ctx context.Context) error {
	m := &etcdschema.HostMapping{Host: a.cfg.Host, Cell: a.cfg.Cell, CreatedAt: time.Now().UTC()}
	resp, err := a.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(a.own.cell), ">", 0),
		clientv3.Compare(clientv3.CreateRevision(a.own.mapping), "=", 0),
	).Then(clientv3.OpPut(a.own.mapping, etcdschema.MustEncode(m))).
		Else(clientv3.OpGet(a.own.cell)).Commit()
	if err != nil {
		return fmt.Errorf("map host %s to cell %s: %w", a.cfg.Host, a.cfg.Cell, err)
	}
	if !resp.Succeeded && len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
		return fmt.Errorf("cell %s is not known yet (start its conductor or create it)", a.cfg.Cell)
	}
	return nil
}

// liveness holds the current liveness lease (it changes if etcd loses it)
// and the renewer that keeps it alive.
type liveness struct {
	mu      sync.Mutex
	id      clientv3.LeaseID
	renewer *LeaseRenewer
	done    chan struct{} // the ticker goroutine has ended
}

func (l *liveness) get() clientv3.LeaseID {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.id
}

// close waits for the ticker (its ctx has ended) and closes the renewer.
func (l *liveness) close() {
	<-l.done
	l.renewer.Close()
}

// startLiveness grants a lease of service_down_time, makes the host up
// under it (goUp: service record and alive key) and keeps it alive every
// report_interval, each beat one
// request on the renewer's long-lived keepalive stream. If the lease is
// lost (etcd unreachable past the TTL) a new one is granted when etcd
// returns. The ticker stops when ctx ends; close then closes the renewer.
func (a *Agent) startLiveness(ctx context.Context) (*liveness, error) {
	r, err := NewLeaseRenewer(a.cli, a.Intervals().RenewTimeout(), a.log)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", a.cfg.Host, err)
	}
	id, err := a.grantUp(ctx)
	if err != nil {
		r.Close()
		return nil, err
	}
	l := &liveness{id: id, renewer: r, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		t := time.NewTicker(a.cfg.ReportInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			id, err := a.renewAlive(ctx, r, l.get())
			l.mu.Lock()
			l.id = id
			l.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				a.log.Warn("could not renew liveness", "error", err)
			}
		}
	}()
	return l, nil
}

// renewAlive is one liveness beat: one renewal of lease on r's stream.
// When etcd answers that the lease is gone (it expired while etcd was
// unreachable, or was revoked) it grants a new lease and writes the alive
// key again under it. A beat that got no answer (within RenewTimeout)
// keeps the lease and the next beat tries again: a new lease and alive
// key for every slow answer would only add writes to a slow etcd. It
// returns the lease in use afterwards.
func (a *Agent) renewAlive(ctx context.Context, r *LeaseRenewer, lease clientv3.LeaseID) (clientv3.LeaseID, error) {
	_, err := r.Renew(ctx, lease)
	return a.renewedAlive(ctx, lease, err)
}

// renewedAlive is the rest of a liveness beat once its renewal of lease
// has been answered with err (renewAlive).
func (a *Agent) renewedAlive(ctx context.Context, lease clientv3.LeaseID, err error) (clientv3.LeaseID, error) {
	switch {
	case err == nil || ctx.Err() != nil:
		return lease, nil
	case !errors.Is(err, ErrLeaseLost):
		return lease, fmt.Errorf("agent %s: renew liveness: %w", a.cfg.Host, err)
	}
	a.log.Warn("liveness lease lost, re-registering", "error", err)
	id, err := a.grantAlive(ctx)
	if err != nil {
		return lease, err
	}
	// The host read down without its lease: its servers may have been
	// evacuated meanwhile, and their copies here must go.
	go a.cleanEvacuated(ctx, nil)
	return id, nil
}

// grantUp grants a liveness lease of service_down_time and makes the host
// up under it (goUp): the agent's start.
func (a *Agent) grantUp(ctx context.Context) (clientv3.LeaseID, error) {
	lease, err := a.grantLease(ctx)
	if err != nil {
		return 0, err
	}
	if err := a.goUp(ctx, lease); err != nil {
		return 0, err
	}
	return lease, nil
}

// grantAlive grants a liveness lease of service_down_time and writes the
// alive key under it: a lost lease replaced. The service record is left
// as it is: it exists since the host came up, and if an operator deleted
// it meanwhile, writing it again would list the host up without the
// provider and mapping a delete removes.
func (a *Agent) grantAlive(ctx context.Context) (clientv3.LeaseID, error) {
	lease, err := a.grantLease(ctx)
	if err != nil {
		return 0, err
	}
	if err := a.putAlive(ctx, lease); err != nil {
		return 0, err
	}
	return lease, nil
}

// grantLease grants a liveness lease of service_down_time.
func (a *Agent) grantLease(ctx context.Context) (clientv3.LeaseID, error) {
	ttl := int64(a.cfg.ServiceDownTime / time.Second)
	if ttl < 1 {
		ttl = 1
	}
	lease, err := a.cli.Grant(ctx, ttl)
	if err != nil {
		return 0, fmt.Errorf("agent %s: grant liveness lease: %w", a.cfg.Host, err)
	}
	return lease.ID, nil
}

// putAlive writes the host's alive key, bound to lease.
func (a *Agent) putAlive(ctx context.Context, lease clientv3.LeaseID) error {
	key, val := a.alive(lease)
	if _, err := a.cli.Put(ctx, key, val, clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("agent %s: write alive key: %w", a.cfg.Host, err)
	}
	return nil
}

// alive is the host's alive key and its value under lease, alive since
// now.
func (a *Agent) alive(lease clientv3.LeaseID) (key, val string) {
	rec := &etcdschema.Alive{Host: a.cfg.Host, LeaseID: int64(lease), Since: time.Now().UTC()}
	return a.keys.Alive(a.cfg.Host), etcdschema.MustEncode(rec)
}

// syncInstances writes the periodic list the schedulers reconcile
// against (sync_instance_info): the uuids of this host's instance info,
// each with the flavor id its instance record has when that record places
// it here, so a scheduler whose view has another flavor (an instance
// info update lost on a resize) re-reads the host. An instance the
// record places elsewhere (this host is the source of a move in flight,
// which keeps its info until confirmed) has no flavor in the list: its
// truth is the migration's, and the uuid alone is compared.
//
// The uuid list is a serializable read (the member's applied state, with
// no raft read-index round first), as Nova's _sync_scheduler_instance_info
// lists the host's instances with use_slave=True: a list a moment old is
// what the sync has always been allowed to send, since a scheduler that
// finds it differs re-reads the host with a linearizable read, and the
// next period sends the list again. At 100,000 hosts the syncs are ~880
// reads a second, and the read-index round was 42 of an idle sync's 291
// allocations (client and member), ~16% of its CPU. Once the agent's
// follow has listed (host_follow.go) the list is its, a moment old in
// the same way, and an idle host with no instance reads nothing.
func (a *Agent) syncInstances(ctx context.Context) (wrote bool, err error) {
	uuids, ok := a.follow.instanceUUIDs()
	if !ok {
		if uuids, err = a.infoUUIDs(ctx, clientv3.WithSerializable()); err != nil {
			return false, fmt.Errorf("agent %s: %w", a.cfg.Host, err)
		}
	}
	records, err := a.instanceRecords(ctx, uuids, true)
	if err != nil {
		return false, fmt.Errorf("agent %s: %w", a.cfg.Host, err)
	}
	s := &etcdschema.HostSync{Host: a.cfg.Host, At: time.Now().UTC(), UUIDs: uuids, FlavorIDs: make([]string, len(uuids))}
	for i, u := range uuids {
		s.FlavorIDs[i] = records[u].inst.Flavor.ID
	}
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	if last := a.lastSync; last != nil && a.unwritten < syncRewriteEvery-1 &&
		slices.Equal(last.UUIDs, s.UUIDs) && slices.Equal(last.FlavorIDs, s.FlavorIDs) {
		a.unwritten++
		return false, nil
	}
	if _, err := a.cli.Put(ctx, a.own.sync, etcdschema.MustEncode(s)); err != nil {
		return false, fmt.Errorf("agent %s: write instance sync: %w", a.cfg.Host, err)
	}
	a.lastSync, a.unwritten = s, 0
	return true, nil
}

// syncRewriteEvery is how often an instance sync whose list has not
// changed is written anyway: every this many syncs (20 minutes at Nova's
// 120 s interval). The list is the same etcd keys the schedulers watch,
// so a list written again unchanged tells them nothing new: each
// scheduler compared it with its view when it arrived, and compares a
// changed list the moment it is written. The unchanged rewrites were the
// agents' one steady write (833 a second at 100,000 hosts, each a raft
// proposal and a watch event to every scheduler and every fleet watch).
// The rare rewrite keeps the record's At recent and puts the list back
// if its key was removed, as the kubelet refreshes an unchanged node
// status every few minutes rather than at every beat.
const syncRewriteEvery = 10
