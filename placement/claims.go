package placement

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/rawtxn"
)

// PutAllocations replaces consumer's allocations in one etcd transaction
// (PUT /allocations/{consumer}). See writeAllocations for the rules.
func (s *Service) PutAllocations(ctx context.Context, consumer string, w AllocationWrite) error {
	_, err := s.writeAllocations(ctx, map[string]AllocationWrite{consumer: w}, ClaimOptions{}, false)
	return err
}

// PutAllocationsMulti replaces several consumers' allocations in one
// transaction: all or nothing (POST /allocations, multi-instance claims).
func (s *Service) PutAllocationsMulti(ctx context.Context, writes map[string]AllocationWrite) error {
	_, err := s.writeAllocations(ctx, writes, ClaimOptions{}, false)
	return err
}

// PutAllocationsWithOptions is PutAllocationsMulti with options; it returns
// the etcd revision of the write.
func (s *Service) PutAllocationsWithOptions(ctx context.Context, writes map[string]AllocationWrite, opts ClaimOptions) (int64, error) {
	return s.writeAllocations(ctx, writes, opts, false)
}

// DeleteAllocations removes every allocation of consumer and frees the
// usages atomically, whatever the consumer's generation; ErrNotFound when
// the consumer has none.
func (s *Service) DeleteAllocations(ctx context.Context, consumer string) error {
	_, err := s.deleteAllocations(ctx, consumer)
	return err
}

// DeleteAllocationsRev is DeleteAllocations that also returns the etcd
// revision of the write, for a caller that waits for the index to apply it.
func (s *Service) DeleteAllocationsRev(ctx context.Context, consumer string) (int64, error) {
	return s.deleteAllocations(ctx, consumer)
}

func (s *Service) deleteAllocations(ctx context.Context, consumer string) (int64, error) {
	return s.writeAllocations(ctx, map[string]AllocationWrite{consumer: {}},
		ClaimOptions{IgnoreConsumerGeneration: true}, true)
}

// DeleteAllocationsGuarded is DeleteAllocations that also needs guards to
// hold in the same transaction: ErrGuardFailed when one does not. It is how
// a scheduler frees only the claim it wrote itself, and how the leader
// frees an orphan only while it leads and the orphan is still one.
func (s *Service) DeleteAllocationsGuarded(ctx context.Context, consumer string, guards ...clientv3.Cmp) error {
	_, err := s.writeAllocations(ctx, map[string]AllocationWrite{consumer: {}},
		ClaimOptions{IgnoreConsumerGeneration: true, Guards: guards}, true)
	return err
}

// GetAllocations returns the consumer's record read from etcd, or
// ErrNotFound when it holds no allocations.
func (s *Service) GetAllocations(ctx context.Context, consumer string) (*etcdschema.Consumer, error) {
	key := s.keys.Consumer(consumer)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read allocations of %s: %w", consumer, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("allocations of %s: %w", consumer, ErrNotFound)
	}
	c := &etcdschema.Consumer{}
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, c); err != nil {
		return nil, err
	}
	return c, nil
}

// claimRead is what one attempt of a write read from etcd.
type claimRead struct {
	consumers    map[string]*etcdschema.Consumer // nil value or none: absent
	consumerRevs map[string]int64
	providers    map[string]*storedProvider // nil value: absent

	// spBuf holds the providers of a claim read from the index (a
	// claim names one or two).
	spBuf [2]storedProvider
}

// writeAllocations is Placement's _set_allocations over etcd: for each
// consumer, drop its old allocations, check min/max/step and capacity of
// the new ones, bump every touched provider's and consumer's generation,
// and delete consumers left with nothing — all in one transaction that
// compares every record it read. A lost race is re-read and retried
// retryCount times, then ErrConcurrentUpdate.
func (s *Service) writeAllocations(ctx context.Context, writes map[string]AllocationWrite, opts ClaimOptions, mustExist bool) (int64, error) {
	start := time.Now()
	rev, err := s.writeAllocationsRetrying(ctx, writes, opts, mustExist)
	s.metrics.Claim(claimOutcome(err))
	switch {
	case err == nil && len(writes) > 0:
		s.claimWrites.Add(1)
		s.claimNanos.Add(int64(time.Since(start)))
	case errors.Is(err, ErrConcurrentUpdate):
		s.claimGaveUp.Add(1)
	}
	return rev, err
}

func (s *Service) writeAllocationsRetrying(ctx context.Context, writes map[string]AllocationWrite, opts ClaimOptions, mustExist bool) (int64, error) {
	if len(writes) == 0 {
		return 0, nil
	}
	consumers := make([]string, 0, len(writes))
	for c, w := range writes {
		consumers = append(consumers, c)
		for rp, a := range w.Allocations {
			for rc, n := range a.Resources {
				if n < 1 {
					return 0, detailf(ErrInvalid, "allocation of %d %s on %s for %s: amounts must be at least 1", n, rc, rp, c)
				}
			}
		}
	}
	sort.Strings(consumers)
	what := consumers[0]
	if len(consumers) > 1 {
		what = fmt.Sprintf("%d consumers", len(consumers))
	}
	// First, optimistically, from the watch-fed index: the transaction
	// compares the mod revision of every record the plan used, so a stale
	// index costs a failed compare, never a wrong write. Anything but a
	// commit (a plan error included, which the index's lag may have
	// caused) falls through to the reads below, which decide as before.
	// This saves the claim's read round trip whenever the index is
	// current, which it is for the scheduler's claims (it waited for the
	// request's revision before searching).
	//
	// A claim the group commit answered stale (a concurrent claim of this
	// service on the same provider committed first, and is in the index
	// now) is planned again from the index, a few times, instead of read.
	for replan := 0; replan <= maxReplans; replan++ {
		rd, ok := s.readFromIndex(consumers, writes)
		if !ok {
			break
		}
		plan, err := s.planClaim(rd, consumers, writes, opts, mustExist)
		if err != nil {
			break
		}
		rev, ok, err := s.commitClaim(ctx, plan, opts)
		if errors.Is(err, errStalePlan) {
			s.claimReplans.Add(1)
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("claim %s: %w", what, err)
		}
		if ok {
			return rev, nil
		}
		// A claim transaction lost, to a concurrent claim or to a
		// change the index had not applied yet: counted as the read
		// path counts its lost races.
		s.metrics.ClaimConflict()
		s.claimRaces.Add(1)
		break
	}
	for attempt := 0; attempt <= s.retryCount; attempt++ {
		rd, err := s.readForClaim(ctx, consumers, writes)
		if err != nil {
			return 0, fmt.Errorf("claim %s: %w", what, err)
		}
		plan, err := s.planClaim(rd, consumers, writes, opts, mustExist)
		if err != nil {
			return 0, fmt.Errorf("claim %s: %w", what, err)
		}
		rev, ok, err := s.commitClaim(ctx, plan, opts)
		if err != nil && !errors.Is(err, errStalePlan) {
			return 0, fmt.Errorf("claim %s: %w", what, err)
		}
		if ok {
			return rev, nil
		}
		// Lost, or certain to (stale): read again.
		s.metrics.ClaimConflict()
		s.claimRaces.Add(1)
		s.log.Debug("claim lost a race, retrying", "consumer", what, "attempt", attempt+1)
	}
	return 0, fmt.Errorf("claim %s: %w", what, detailf(ErrConcurrentUpdate, "Inventory and/or allocations changed while attempting to allocate: gave up after %d retries", s.retryCount))
}

// maxReplans bounds how often one write is planned again from the index
// after stale answers before it reads etcd (each stale answer means
// another claim on its provider committed: the provider is filling up).
const maxReplans = 8

// errStalePlan is commitClaim's answer for a claim the group commit did
// not send because a claim of this service committed just before made its
// compares fail: plan again from the index, which already has that claim.
var errStalePlan = errors.New("planned from records a concurrent claim has replaced")

// commitClaim runs a planned claim, batched with the claims ready at the
// same moment (claim_batch.go): ok is false when its compares failed (a
// lost race), ErrGuardFailed when the caller's guards did, errStalePlan
// when it was not sent as certain to lose. A committed claim's records
// are in the index before anyone hears of its commit (assume.go), so this
// service's next plan and candidate search see them without waiting for
// the watch; any other outcome, an unknown one included, applies nothing.
func (s *Service) commitClaim(ctx context.Context, plan *claimPlan, opts ClaimOptions) (int64, bool, error) {
	ops := append(plan.ops, opts.GuardOps...)
	if len(plan.cmps) > maxTxnOps || len(ops) > maxTxnOps {
		return 0, false, detailf(ErrTooManyOps, "the write needs %d compares and %d operations, etcd allows %d of each in one transaction", len(plan.cmps), len(ops), maxTxnOps)
	}
	plan.idx = s.idx
	r := s.claims.commitThen(ctx, plan.cmps, plan.cmpKeys, ops, plan.opKeys, guardCompares(opts.Guards), plan)
	switch {
	case r.err != nil:
		return 0, false, r.err
	case r.guardFailed:
		return 0, false, ErrGuardFailed
	case r.stale:
		return 0, false, errStalePlan
	}
	return r.rev, r.ok, nil
}

// guardCompares are a claim's guards as etcd's messages: each Cmp's own
// (clientv3.Compare made it; GetCompare hands it out without a copy), so
// the caller must not change a guard while the claim runs.
func guardCompares(guards []clientv3.Cmp) []*pb.Compare {
	if len(guards) == 0 {
		return nil
	}
	out := make([]*pb.Compare, len(guards))
	for i := range guards {
		out[i] = guards[i].GetCompare()
	}
	return out
}

// readFromIndex is readForClaim answered from the watch-fed index, when
// it is loaded and knows every provider involved. The records are the
// index's own (never mutated: planClaim copies what it changes).
func (s *Service) readFromIndex(consumers []string, writes map[string]AllocationWrite) (*claimRead, bool) {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	st := s.idx.st
	if st.rev == 0 {
		return nil, false // not started: an agent's or the API's store-only service
	}
	// The consumer maps are made for a consumer the index has: a new
	// one's claim (most claims) reads them as empty.
	rd := &claimRead{providers: make(map[string]*storedProvider, 1)}
	used := 0
	addProvider := func(rp string) bool {
		if _, ok := rd.providers[rp]; ok {
			return true
		}
		e, ok := st.providers[rp]
		if !ok {
			return false
		}
		// The indexed record itself, not normalized: a plan reads its
		// maps (nil reads as empty) and makes its next record as a clone
		// of a normalized one would be (planClaimWith), and an indexed
		// record always has its root uuid.
		var sp *storedProvider
		if used < len(rd.spBuf) {
			sp = &rd.spBuf[used]
			used++
		} else {
			sp = new(storedProvider)
		}
		*sp = storedProvider{p: e.p, modRev: e.modRev}
		rd.providers[rp] = sp
		return true
	}
	for _, c := range consumers {
		if ce, ok := st.consumers[c]; ok {
			if rd.consumers == nil {
				rd.consumers = make(map[string]*etcdschema.Consumer, len(consumers))
				rd.consumerRevs = make(map[string]int64, len(consumers))
			}
			rd.consumers[c] = ce.c
			rd.consumerRevs[c] = ce.modRev
			for rp := range ce.c.Allocations {
				if !addProvider(rp) {
					return nil, false
				}
			}
		}
		for rp := range writes[c].Allocations {
			if !addProvider(rp) {
				return nil, false
			}
		}
	}
	return rd, true
}

// readForClaim reads the consumers and every provider their old and new
// allocations touch, each group at one revision.
func (s *Service) readForClaim(ctx context.Context, consumers []string, writes map[string]AllocationWrite) (*claimRead, error) {
	rd := &claimRead{
		consumers:    map[string]*etcdschema.Consumer{},
		consumerRevs: map[string]int64{},
		providers:    map[string]*storedProvider{},
	}
	want := map[string]struct{}{}
	for _, c := range consumers {
		for rp := range writes[c].Allocations {
			want[rp] = struct{}{}
		}
	}
	// First round: consumers plus the providers of the new allocations,
	// which is everything for a first claim.
	ops := make([]clientv3.Op, 0, len(consumers)+len(want))
	for _, c := range consumers {
		ops = append(ops, clientv3.OpGet(s.keys.Consumer(c)))
	}
	first := sortedKeys(want)
	for _, rp := range first {
		ops = append(ops, clientv3.OpGet(s.keys.Provider(rp)))
	}
	resps, err := s.readMany(ctx, ops)
	if err != nil {
		return nil, err
	}
	for i, c := range consumers {
		kvs := resps[i].GetResponseRange().Kvs
		if len(kvs) == 0 {
			rd.consumers[c] = nil
			continue
		}
		rec := &etcdschema.Consumer{}
		if err := etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, rec); err != nil {
			return nil, err
		}
		rd.consumers[c] = rec
		rd.consumerRevs[c] = kvs[0].ModRevision
	}
	if err := s.decodeProviders(rd, first, resps[len(consumers):]); err != nil {
		return nil, err
	}
	// Second round: providers only the old allocations name.
	var more []string
	for _, c := range consumers {
		if rec := rd.consumers[c]; rec != nil {
			for rp := range rec.Allocations {
				if _, ok := rd.providers[rp]; !ok {
					rd.providers[rp] = nil
					more = append(more, rp)
				}
			}
		}
	}
	if len(more) > 0 {
		sort.Strings(more)
		ops = ops[:0]
		for _, rp := range more {
			ops = append(ops, clientv3.OpGet(s.keys.Provider(rp)))
		}
		resps, err := s.readMany(ctx, ops)
		if err != nil {
			return nil, err
		}
		if err := s.decodeProviders(rd, more, resps); err != nil {
			return nil, err
		}
	}
	return rd, nil
}

func (s *Service) decodeProviders(rd *claimRead, uuids []string, resps []*etcdResponseOp) error {
	for i, rp := range uuids {
		kvs := resps[i].GetResponseRange().Kvs
		if len(kvs) == 0 {
			rd.providers[rp] = nil
			continue
		}
		p := &etcdschema.Provider{}
		if err := etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, p); err != nil {
			return err
		}
		normalizeProvider(p)
		rd.providers[rp] = &storedProvider{p: p, modRev: kvs[0].ModRevision}
	}
	return nil
}

// planClaim checks the writes against what was read and returns the
// transaction's compares and operations.
func (s *Service) planClaim(rd *claimRead, consumers []string, writes map[string]AllocationWrite, opts ClaimOptions, mustExist bool) (*claimPlan, error) {
	return s.planClaimWith(rd, consumers, writes, opts, mustExist, nil)
}

// claimPlan is a planned allocation write: its transaction's compares and
// operations, and the records those operations put or delete, which the
// index applies once the transaction commits (assume.go).
type claimPlan struct {
	cmps []*pb.Compare
	ops  []*pb.RequestOp
	own  []ownWrite
	// cmpKeys and opKeys are the keys of cmps and ops, which the group
	// commit would otherwise copy out of them again.
	cmpKeys, opKeys []string

	// idx is the index the plan's records go to once it commits.
	idx *index

	// The slices' arrays for the usual claim: a consumer and a provider.
	cmpsBuf [2]*pb.Compare
	opsBuf  [2]*pb.RequestOp
	ownBuf  [2]ownWrite
	keysBuf [4]string
}

// committed applies a committed plan's records to the index (assume.go).
func (p *claimPlan) committed(rev int64) { p.idx.assume(rev, p.own) }

// finishProvider amends the next record of a provider a claim touches,
// after its usages and generation are set and before it is encoded. The
// reshaper uses it to write the provider's new inventories in the same put.
type finishProvider func(rp string, next *etcdschema.Provider) error

// planClaimWith is planClaim with finish (may be nil) called for every
// provider record the transaction will put.
func (s *Service) planClaimWith(rd *claimRead, consumers []string, writes map[string]AllocationWrite, opts ClaimOptions, mustExist bool, finish finishProvider) (*claimPlan, error) {
	now := s.now()
	// Usages before and after, per provider touched.
	after := map[string]map[string]int64{}
	usage := func(rp string) map[string]int64 {
		u := after[rp]
		if u == nil {
			u = map[string]int64{}
			if sp := rd.providers[rp]; sp != nil {
				for rc, n := range sp.p.Usages {
					u[rc] = n
				}
			}
			after[rp] = u
		}
		return u
	}
	// Placement bumps the generation of the providers a write allocates
	// on, and of those whose allocations a write empties (PUT or POST of
	// no allocations), but not of providers an allocation merely moves off,
	// nor on DELETE. Berth's transactions compare mod revisions, so this
	// only keeps the generations clients see the same as Placement's.
	bump := map[string]bool{}
	// Every consumer and provider is compared and written at most once:
	// sized once, the slices do not grow record by record, and a claim of
	// one consumer on one provider keeps them in the plan itself.
	plan := &claimPlan{}
	n := len(consumers) + len(rd.providers)
	cmps, ops, own := plan.cmpsBuf[:0], plan.opsBuf[:0], plan.ownBuf[:0]
	keys := plan.keysBuf[:]
	if n > len(plan.cmpsBuf) {
		cmps = make([]*pb.Compare, 0, n)
		ops = make([]*pb.RequestOp, 0, n)
		own = make([]ownWrite, 0, n)
		keys = make([]string, 2*n)
	}
	cmpKeys, opKeys := keys[:0:n], keys[n:n]
	for _, c := range consumers {
		w := writes[c]
		old := rd.consumers[c]
		for rp := range w.Allocations {
			bump[rp] = true
		}
		if len(w.Allocations) == 0 && !mustExist && old != nil {
			for rp := range old.Allocations {
				bump[rp] = true
			}
		}
		if mustExist && old == nil {
			return nil, detailf(ErrNotFound, "No allocations for consumer '%s'", c)
		}
		if !opts.IgnoreConsumerGeneration {
			if err := checkConsumerGeneration(w, old); err != nil {
				return nil, err
			}
		}
		if old != nil {
			for rp, a := range old.Allocations {
				u := usage(rp)
				for rc, n := range a.Resources {
					u[rc] -= n
				}
			}
		}
		// Sorted, so that of several faults the same one is reported every
		// time (Placement reports the first in the body's order).
		var rpBuf, rcBuf [8]string
		for _, rp := range sortedKeysIn(w.Allocations, rpBuf[:]) {
			a := w.Allocations[rp]
			sp := rd.providers[rp]
			if sp == nil {
				return nil, detailf(ErrProviderNotFound, "Allocation for resource provider '%s' that does not exist.", rp)
			}
			u := usage(rp)
			for _, rc := range sortedKeysIn(a.Resources, rcBuf[:]) {
				n := a.Resources[rc]
				inv, ok := sp.p.Inventories[rc]
				if !ok {
					return nil, detailf(ErrInsufficientCapacity, "Inventory for '%s' on resource provider '%s' invalid.", rc, rp)
				}
				if n < inv.MinUnit || n > inv.MaxUnit || (inv.StepSize > 1 && n%inv.StepSize != 0) {
					return nil, detailf(ErrInsufficientCapacity, "Unable to create allocation for '%s' on resource provider '%s'. The requested amount would violate inventory constraints.", rc, rp)
				}
				u[rc] += n
			}
		}
		ck := s.keys.Consumer(c)
		cmps = append(cmps, rawtxn.ModRevisionIs(ck, rd.consumerRevs[c]))
		cmpKeys = append(cmpKeys, ck)
		if len(w.Allocations) == 0 {
			if old != nil {
				ops = append(ops, rawtxn.Delete(ck))
				opKeys = append(opKeys, ck)
				own = append(own, ownWrite{goneConsumer: c})
			}
			continue
		}
		rec := &etcdschema.Consumer{
			UUID: c, Generation: 1, ProjectID: w.ProjectID, UserID: w.UserID,
			ConsumerType: w.ConsumerType, CreatedAt: now, UpdatedAt: now,
			Allocations: make(map[string]etcdschema.ConsumerAllocation, len(w.Allocations)),
		}
		if old != nil {
			rec.Generation = old.Generation + 1
			rec.CreatedAt = old.CreatedAt
			if rec.ConsumerType == "" {
				rec.ConsumerType = old.ConsumerType
			}
			if rec.ProjectID == "" {
				rec.ProjectID = old.ProjectID
			}
			if rec.UserID == "" {
				rec.UserID = old.UserID
			}
		}
		for rp, a := range w.Allocations {
			r := make(map[string]int64, len(a.Resources))
			for rc, n := range a.Resources {
				r[rc] = n
			}
			rec.Allocations[rp] = etcdschema.ConsumerAllocation{Resources: r}
			if cs := writeOrder(a.Order, r); cs != nil {
				if rec.Order == nil {
					rec.Order = &etcdschema.AllocationOrder{}
				}
				if rec.Order.Classes == nil {
					rec.Order.Classes = map[string][]string{}
				}
				rec.Order.Classes[rp] = cs
			}
		}
		if ps := writeOrder(w.Order, rec.Allocations); ps != nil {
			if rec.Order == nil {
				rec.Order = &etcdschema.AllocationOrder{}
			}
			rec.Order.Providers = ps
		}
		val, err := etcdschema.EncodeBytes(rec)
		if err != nil {
			return nil, err
		}
		ops = append(ops, rawtxn.PutBytes(ck, val))
		opKeys = append(opKeys, ck)
		own = append(own, ownWrite{consumer: rec})
	}
	var rpBuf, rcBuf [8]string
	for _, rp := range sortedKeysIn(after, rpBuf[:]) {
		sp := rd.providers[rp]
		if sp == nil {
			continue // an old allocation on a provider since deleted
		}
		u := after[rp]
		for _, rc := range sortedKeysIn(u, rcBuf[:]) {
			n := u[rc]
			before := sp.p.Usages[rc]
			if n == before {
				continue
			}
			inv, ok := sp.p.Inventories[rc]
			if !ok {
				if n > before {
					return nil, detailf(ErrInsufficientCapacity, "Inventory for '%s' on resource provider '%s' invalid.", rc, rp)
				}
				continue
			}
			// Going over capacity is refused only when it makes usage
			// worse: a provider whose inventory shrank under its usage
			// can still have allocations moved or reduced.
			if capy := inv.Capacity(); n > capy && n > before {
				return nil, detailf(ErrInsufficientCapacity, "Unable to create allocation for '%s' on resource provider '%s'. The requested amount would exceed the capacity.", rc, rp)
			}
		}
		// The next record shares everything but its usages with the one
		// it replaces (records are never mutated once planned or indexed,
		// and a claim changes usages and generation only), unless finish
		// amends it.
		var next *etcdschema.Provider
		if finish != nil {
			next = sp.p.Clone()
		} else {
			// Nil and empty as Clone leaves them, so the record put is
			// byte for byte what it was.
			shallow := *sp.p
			if shallow.Inventories == nil {
				shallow.Inventories = map[string]etcdschema.Inventory{}
			}
			if len(shallow.Traits) == 0 {
				shallow.Traits = nil
			}
			if len(shallow.Aggregates) == 0 {
				shallow.Aggregates = nil
			}
			shallow.Usages = make(map[string]int64, len(sp.p.Usages))
			maps.Copy(shallow.Usages, sp.p.Usages)
			next = &shallow
		}
		for rc, n := range u {
			if n <= 0 {
				delete(next.Usages, rc)
			} else {
				next.Usages[rc] = n
			}
		}
		if bump[rp] {
			next.Generation++
		}
		next.UpdatedAt = now
		if finish != nil {
			if err := finish(rp, next); err != nil {
				return nil, err
			}
		}
		val, err := etcdschema.EncodeBytes(next)
		if err != nil {
			return nil, err
		}
		pk := s.keys.Provider(rp)
		cmps = append(cmps, rawtxn.ModRevisionIs(pk, sp.modRev))
		cmpKeys = append(cmpKeys, pk)
		ops = append(ops, rawtxn.PutBytes(pk, val))
		opKeys = append(opKeys, pk)
		own = append(own, ownWrite{provider: next})
	}
	plan.cmps, plan.ops, plan.own, plan.cmpKeys, plan.opKeys = cmps, ops, own, cmpKeys, opKeys
	return plan, nil
}

// checkConsumerGeneration is Placement's consumer generation rule (1.28):
// the caller names the generation it read, or null for a consumer that
// must not exist yet.
func checkConsumerGeneration(w AllocationWrite, old *etcdschema.Consumer) error {
	switch {
	case w.ConsumerGeneration == nil && old != nil:
		return detailf(ErrConsumerGenerationConflict, "consumer generation conflict - expected %d but got None", old.Generation)
	case w.ConsumerGeneration != nil && old == nil:
		return detailf(ErrConsumerGenerationConflict, "consumer generation conflict - expected null but got %d", *w.ConsumerGeneration)
	case w.ConsumerGeneration != nil && *w.ConsumerGeneration != old.Generation:
		return detailf(ErrConsumerGenerationConflict, "consumer generation conflict - expected %d but got %d", old.Generation, *w.ConsumerGeneration)
	}
	return nil
}

// readMany runs several reads in one transaction, so they see one
// revision. Reads beyond etcd's per-transaction limit are split.
func (s *Service) readMany(ctx context.Context, ops []clientv3.Op) ([]*etcdResponseOp, error) {
	out := make([]*etcdResponseOp, 0, len(ops))
	for start := 0; start < len(ops); start += maxTxnOps {
		end := min(start+maxTxnOps, len(ops))
		resp, err := s.cli.Txn(ctx).Then(ops[start:end]...).Commit()
		if err != nil {
			return nil, fmt.Errorf("read: %w", err)
		}
		out = append(out, resp.Responses...)
	}
	return out, nil
}

// sortedKeysIn is sortedKeys in buf when the keys fit (a claim names a
// provider or two and a few resource classes), so a claim's plan sorts
// without allocating.
func sortedKeysIn[V any](m map[string]V, buf []string) []string {
	out := buf[:0]
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	return sortedKeysIn(m, make([]string, 0, len(m)))
}

// writeOrder is the order a record keeps of m's keys: order when it names
// each key exactly once and is not simply sorted, else nil (read back as
// sorted), so that the usual write, the scheduler's, stores nothing more.
func writeOrder[V any](order []string, m map[string]V) []string {
	if len(order) != len(m) || slices.IsSorted(order) {
		return nil
	}
	seen := make(map[string]bool, len(order))
	for _, k := range order {
		if _, ok := m[k]; !ok || seen[k] {
			return nil
		}
		seen[k] = true
	}
	return slices.Clone(order)
}
