package placement

import (
	"context"
	"errors"
	"fmt"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/rawtxn"
)

// Reshape is one POST /reshaper: the complete new inventories of some
// providers and the complete new allocations of some consumers, applied
// together or not at all. A virt driver uses it to move inventory (and the
// allocations against it) from a root provider to new children.
type Reshape struct {
	// Inventories replaces each named provider's whole inventory. The
	// provider's generation must still be Generation.
	Inventories map[string]ProviderInventories
	// Allocations replaces each named consumer's allocations, as PUT
	// /allocations/{consumer} does at 1.28+ (consumer generation checked;
	// no allocations removes the consumer).
	Allocations map[string]AllocationWrite
}

// ProviderInventories is one provider's part of a Reshape.
type ProviderInventories struct {
	Generation  int64
	Inventories map[string]etcdschema.Inventory
}

var (
	// ErrInventoryProviderNotFound: a provider whose inventories a reshape
	// replaces does not exist (400 placement.resource_provider.not_found).
	// It is also an ErrProviderNotFound.
	ErrInventoryProviderNotFound = fmt.Errorf("%w (reshape inventories)", ErrProviderNotFound)
	// ErrResourceClassNotFound: an inventory or allocation names a class
	// that is neither standard nor created (400).
	ErrResourceClassNotFound = errors.New("placement: no such resource class")
)

// Reshape applies r in one etcd transaction and returns its revision. The
// checks follow Placement's reshaper, in its order, against the state the
// reshape leaves behind:
//
//  1. every provider in Inventories exists and has the given generation;
//  2. every consumer's generation matches, and every provider its new
//     allocations name exists;
//  3. every resource class named exists;
//  4. every provider the allocations name has inventory of at least one
//     class they name;
//  5. the new allocations fit (min_unit, max_unit, step_size and
//     (total-reserved)*allocation_ratio), checked against the new
//     inventories plus, until the end of the reshape, the old records of
//     classes it removes — so allocations can move off a class that goes;
//  6. no class removed from a provider still has allocations afterwards
//     (ErrInventoryInUse).
//
// A shrunken inventory under allocations the reshape does not touch is
// allowed, as in Placement. Each provider in Inventories moves its
// generation as Placement's does: +1 for the interim inventory (when the
// new one is not empty), +1 when the allocation step visits it (a new
// allocation names it, or a consumer whose allocations are emptied held
// some there), +1 for the final inventory. Other providers move as in any
// allocation write: by one when visited, not at all when allocations only
// move off them.
//
// The transaction compares the mod revision of every provider and consumer
// it read and of every custom class the new inventories use. Losing a race
// re-reads and re-plans (the caller's generations then decide), up to
// retryCount times.
func (s *Service) Reshape(ctx context.Context, r Reshape) (int64, error) {
	if len(r.Inventories) == 0 {
		return 0, detailf(ErrInvalid, "a reshape names at least one provider's inventories")
	}
	consumers := sortedKeys(r.Allocations)
	for _, c := range consumers {
		for rp, a := range r.Allocations[c].Allocations {
			for rc, n := range a.Resources {
				if n < 1 {
					return 0, detailf(ErrInvalid, "allocation of %d %s on %s for %s: amounts must be at least 1", n, rc, rp, c)
				}
			}
		}
	}
	what := fmt.Sprintf("reshape of %d providers and %d consumers", len(r.Inventories), len(consumers))
	for attempt := 0; attempt <= s.retryCount; attempt++ {
		rd, classes, err := s.readForReshape(ctx, consumers, r)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		cmps, ops, err := s.planReshape(rd, classes, consumers, r)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		if len(cmps) > maxTxnOps || len(ops) > maxTxnOps {
			return 0, fmt.Errorf("%s: %w", what, detailf(ErrTooManyOps, "the reshape needs %d compares and %d operations, etcd allows %d of each in one transaction", len(cmps), len(ops), maxTxnOps))
		}
		resp, err := rawtxn.Commit(ctx, s.cli, &pb.TxnRequest{Compare: cmps, Success: ops})
		if err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		if resp.Succeeded {
			s.log.Debug("reshape applied", "providers", len(r.Inventories), "consumers", len(consumers), "revision", resp.Header.Revision)
			return resp.Header.Revision, nil
		}
		s.log.Debug("reshape lost a race, retrying", "attempt", attempt+1)
	}
	return 0, fmt.Errorf("%s: %w", what, detailf(ErrConcurrentUpdate, "Another thread concurrently updated the data. Please retry your update"))
}

// classRead is what a reshape read about one resource class.
type classRead struct {
	exists bool
	key    string // "" for a standard class, which needs no compare
	modRev int64
	// createRev is a custom class's creation order (class_order.go).
	createRev int64
}

// classOrderOfRead ranks the classes read as Placement's class ids do.
func classOrderOfRead(classes map[string]classRead) classOrder {
	o := make(classOrder, len(classes))
	for rc, cr := range classes {
		o[rc] = cr.createRev
	}
	return o
}

// readForReshape reads what a claim of r.Allocations reads, plus the
// providers only named in r.Inventories and the custom classes named
// anywhere. The groups are read at different revisions; the transaction's
// compares make the write see one.
func (s *Service) readForReshape(ctx context.Context, consumers []string, r Reshape) (*claimRead, map[string]classRead, error) {
	rd, err := s.readForClaim(ctx, consumers, r.Allocations)
	if err != nil {
		return nil, nil, err
	}
	var more []string
	for _, rp := range sortedKeys(r.Inventories) {
		if _, ok := rd.providers[rp]; !ok {
			more = append(more, rp)
		}
	}
	names := map[string]struct{}{}
	for _, pi := range r.Inventories {
		for rc := range pi.Inventories {
			names[rc] = struct{}{}
		}
	}
	for _, w := range r.Allocations {
		for _, a := range w.Allocations {
			for rc := range a.Resources {
				names[rc] = struct{}{}
			}
		}
	}
	classes := map[string]classRead{}
	var custom []string
	for _, rc := range sortedKeys(names) {
		switch {
		case stdClassSet[rc]:
			classes[rc] = classRead{exists: true}
		case strings.HasPrefix(rc, "CUSTOM_"):
			custom = append(custom, rc)
		default:
			classes[rc] = classRead{}
		}
	}
	ops := make([]clientv3.Op, 0, len(more)+len(custom))
	for _, rp := range more {
		ops = append(ops, clientv3.OpGet(s.keys.Provider(rp)))
	}
	for _, rc := range custom {
		ops = append(ops, clientv3.OpGet(s.keys.CustomResourceClass(rc), clientv3.WithKeysOnly()))
	}
	if len(ops) == 0 {
		return rd, classes, nil
	}
	resps, err := s.readMany(ctx, ops)
	if err != nil {
		return nil, nil, err
	}
	if err := s.decodeProviders(rd, more, resps[:len(more)]); err != nil {
		return nil, nil, err
	}
	for i, rc := range custom {
		cr := classRead{key: s.keys.CustomResourceClass(rc)}
		if kvs := resps[len(more)+i].GetResponseRange().Kvs; len(kvs) > 0 {
			cr.exists, cr.modRev, cr.createRev = true, kvs[0].ModRevision, kvs[0].CreateRevision
		}
		classes[rc] = cr
	}
	return rd, classes, nil
}

// planReshape checks r against what was read and returns the
// transaction. It owns rd: the providers' records are changed in place.
func (s *Service) planReshape(rd *claimRead, classes map[string]classRead, consumers []string, r Reshape) ([]*pb.Compare, []*pb.RequestOp, error) {
	providers := sortedKeys(r.Inventories)
	// 1. The inventories' providers and their generations.
	old := make(map[string]map[string]etcdschema.Inventory, len(providers))
	for _, rp := range providers {
		sp := rd.providers[rp]
		if sp == nil {
			return nil, nil, detailf(ErrInventoryProviderNotFound, "Resource provider %s in inventories not found: No resource provider with uuid %s found", rp, rp)
		}
		if g := r.Inventories[rp].Generation; g != sp.p.Generation {
			return nil, nil, detailf(ErrGenerationConflict, "resource provider generation conflict for provider %s: actual: %d, given: %d", rp, sp.p.Generation, g)
		}
		old[rp] = sp.p.Inventories
	}
	// 2. Consumer generations, then the providers allocated against.
	for _, c := range consumers {
		if err := checkConsumerGeneration(r.Allocations[c], rd.consumers[c]); err != nil {
			return nil, nil, err
		}
	}
	for _, c := range consumers {
		for _, rp := range sortedKeys(r.Allocations[c].Allocations) {
			if rd.providers[rp] == nil {
				return nil, nil, detailf(ErrProviderNotFound, "Allocation for resource provider '%s' that does not exist.", rp)
			}
		}
	}
	// 3. Classes: Placement meets an unknown one while it writes the
	// interim inventories or as its capacity check starts, before any
	// capacity error.
	for _, rc := range reshapeClassOrder(providers, consumers, r) {
		if !classes[rc].exists {
			return nil, nil, detailf(ErrResourceClassNotFound, "No such resource class %s.", rc)
		}
	}
	// The interim inventory every allocation is checked against: the
	// new records over the old ones (a provider whose new inventory is
	// empty keeps its old one, as Placement skips that interim step).
	for _, rp := range providers {
		if pi := r.Inventories[rp]; len(pi.Inventories) > 0 {
			interim := make(map[string]etcdschema.Inventory, len(old[rp])+len(pi.Inventories))
			for rc, inv := range old[rp] {
				interim[rc] = inv
			}
			for rc, inv := range pi.Inventories {
				interim[rc] = inv
			}
			rd.providers[rp].p.Inventories = interim
		}
	}
	// 4. Providers with none of the classes allocated.
	if err := providersWithoutInterimInventory(rd, classes, consumers, r); err != nil {
		return nil, nil, err
	}
	// 5. The allocations against the interim inventories.
	allocated := map[string]map[string]bool{} // rp → classes the new allocations use
	// visited is Placement's set of providers whose generation the
	// allocation step bumps: those named by new allocations, and those a
	// consumer whose allocations are emptied held.
	visited := map[string]bool{}
	for _, c := range consumers {
		w := r.Allocations[c]
		for rp, a := range w.Allocations {
			visited[rp] = true
			if allocated[rp] == nil {
				allocated[rp] = map[string]bool{}
			}
			for rc := range a.Resources {
				allocated[rp][rc] = true
			}
		}
		if prev := rd.consumers[c]; len(w.Allocations) == 0 && prev != nil {
			for rp := range prev.Allocations {
				visited[rp] = true
			}
		}
	}
	now := s.now()
	inUse := map[string][]string{}
	// finish turns a provider's interim record into its final one.
	finish := func(rp string, next *etcdschema.Provider) {
		pi := r.Inventories[rp]
		for rc := range old[rp] {
			if _, kept := pi.Inventories[rc]; !kept && next.Usages[rc] > 0 {
				inUse[rp] = append(inUse[rp], rc)
			}
		}
		inUse[rp] = classOrderOfRead(classes).sorted(inUse[rp])
		next.Inventories = make(map[string]etcdschema.Inventory, len(pi.Inventories))
		for rc, inv := range pi.Inventories {
			next.Inventories[rc] = inv
		}
		next.Generation = pi.Generation + 1
		if visited[rp] {
			next.Generation++
		}
		if len(pi.Inventories) > 0 {
			next.Generation++
		}
		next.UpdatedAt = now
	}
	touched := map[string]bool{}
	plan, err := s.planClaimWith(rd, consumers, r.Allocations, ClaimOptions{}, false,
		func(rp string, next *etcdschema.Provider) error {
			touched[rp] = true
			// Placement's rule for what a write allocates: usage after it
			// within capacity, even when the usage was over before.
			for _, rc := range sortedKeys(allocated[rp]) {
				if n, capy := next.Usages[rc], next.Inventories[rc].Capacity(); n > capy {
					return detailf(ErrInsufficientCapacity, "Unable to create allocation for '%s' on resource provider '%s'. The requested amount would exceed the capacity.", rc, rp)
				}
			}
			if _, ok := r.Inventories[rp]; ok {
				finish(rp, next)
			}
			return nil
		})
	if err != nil {
		return nil, nil, err
	}
	cmps, ops := plan.cmps, plan.ops
	// Providers whose allocations did not change get their final
	// inventory in a put of their own.
	for _, rp := range providers {
		if touched[rp] {
			continue
		}
		sp := rd.providers[rp]
		next := sp.p.Clone()
		finish(rp, next)
		val, err := etcdschema.Encode(next)
		if err != nil {
			return nil, nil, err
		}
		pk := s.keys.Provider(rp)
		cmps = append(cmps, rawtxn.ModRevisionIs(pk, sp.modRev))
		ops = append(ops, rawtxn.Put(pk, string(val)))
	}
	// 6. Inventory removed under allocations.
	for _, rp := range providers {
		if len(inUse[rp]) > 0 {
			return nil, nil, detailf(ErrInventoryInUse, "Inventory for '%s' on resource provider '%s' in use.", strings.Join(inUse[rp], ", "), rp)
		}
	}
	// A custom class deleted after it was read must not end up in an
	// inventory: compare each one the new inventories use.
	used := map[string]bool{}
	for _, rp := range providers {
		for rc := range r.Inventories[rp].Inventories {
			used[rc] = true
		}
	}
	for _, rc := range sortedKeys(used) {
		if cr := classes[rc]; cr.key != "" {
			cmps = append(cmps, rawtxn.ModRevisionIs(cr.key, cr.modRev))
		}
	}
	return cmps, ops, nil
}

// reshapeClassOrder lists the classes a reshape names in the order
// Placement meets them: the inventories' first, then the allocations'.
func reshapeClassOrder(providers, consumers []string, r Reshape) []string {
	var out []string
	seen := map[string]bool{}
	add := func(rc string) {
		if !seen[rc] {
			seen[rc] = true
			out = append(out, rc)
		}
	}
	for _, rp := range providers {
		for _, rc := range sortedKeys(r.Inventories[rp].Inventories) {
			add(rc)
		}
	}
	for _, c := range consumers {
		w := r.Allocations[c]
		for _, rp := range sortedKeys(w.Allocations) {
			for _, rc := range sortedKeys(w.Allocations[rp].Resources) {
				add(rc)
			}
		}
	}
	return out
}

// providersWithoutInterimInventory is the first check of Placement's
// _check_capacity_exceeded as a reshape meets it: every provider the
// allocations touch (those of consumers being emptied too) must have
// interim inventory of at least one of the classes they name, else the
// whole reshape fails naming every class and every such provider.
func providersWithoutInterimInventory(rd *claimRead, classesRead map[string]classRead, consumers []string, r Reshape) error {
	classes := map[string]bool{}
	providers := map[string]bool{}
	for _, c := range consumers {
		w := r.Allocations[c]
		if prev := rd.consumers[c]; len(w.Allocations) == 0 && prev != nil {
			for rp, a := range prev.Allocations {
				providers[rp] = true
				for rc := range a.Resources {
					classes[rc] = true
				}
			}
		}
		for rp, a := range w.Allocations {
			providers[rp] = true
			for rc := range a.Resources {
				classes[rc] = true
			}
		}
	}
	var missing []string
	for _, rp := range sortedKeys(providers) {
		sp := rd.providers[rp]
		if sp == nil {
			continue // an old allocation on a provider since deleted
		}
		has := false
		for rc := range classes {
			if _, ok := sp.p.Inventories[rc]; ok {
				has = true
				break
			}
		}
		if !has {
			missing = append(missing, rp)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return detailf(ErrInsufficientCapacity, "Inventory for '%s' on resource provider '%s' invalid.",
		strings.Join(classOrderOfRead(classesRead).sorted(sortedKeys(classes)), ", "), strings.Join(missing, ", "))
}
