package aggregates

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Nova's aggregates have an integer id, the row id of its aggregates
// table, and a uuid. Berth keys the record by uuid and allocates ids from
// one counter, Keys.AggregateLastID, holding the last id given. A create
// puts the record and the counter's next value in one transaction that
// compares the counter's mod revision as it read it (its absence for the
// first), so two creates that read the same counter cannot both commit:
// the loser reads again and takes the next id. Ids are never given twice
// (the counter only grows), as MySQL's auto-increment.
//
// Records written before ids (ID 0) are given one the first time the
// aggregates are read, by whichever reader comes first: in one
// transaction per batch, in creation order, under the same two compares
// (prefix and counter), so concurrent first readers cannot give one
// record two ids or two records one id; a reader that loses reads again
// and finds the ids assigned.

// lacksIDs reports whether a record was written before ids.
func (s *Set) lacksIDs() bool {
	for _, a := range s.byUUID {
		if a.ID == 0 {
			return true
		}
	}
	return false
}

// nextID is the id a new aggregate takes: past the counter and past any
// record's id (a counter lost or restored from an older backup must not
// hand out an id in use).
func (s *Set) nextID() int {
	next := int(s.lastID)
	for _, a := range s.byUUID {
		next = max(next, a.ID)
	}
	return next + 1
}

// claimIDs returns the compare and put that move the counter to last,
// for a transaction that gives ids up to last.
func (s *Store) claimIDs(set *Set, last int) (clientv3.Cmp, clientv3.Op) {
	key := s.keys.AggregateLastID()
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", set.lastIDMod)
	if set.lastIDMod == 0 {
		cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
	}
	return cmp, clientv3.OpPut(key, etcdschema.MustEncode(&etcdschema.AggregateLastID{ID: last}))
}

// idBatch bounds the records given ids in one transaction, well within
// etcd's 128 operations (one put each, plus the counter).
const idBatch = 100

// assignIDs gives ids to the records of set that have none, at most
// idBatch of them; List reads again and calls it until none is left. A
// lost race is not an error: the next read sees the winner's ids.
func (s *Store) assignIDs(ctx context.Context, set *Set) error {
	var old []*etcdschema.Aggregate
	for _, a := range set.byUUID {
		if a.ID == 0 {
			old = append(old, a)
		}
	}
	slices.SortFunc(old, func(x, y *etcdschema.Aggregate) int {
		if c := x.CreatedAt.Compare(y.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(x.UUID, y.UUID)
	})
	old = old[:min(len(old), idBatch)]
	next := set.nextID()
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.keys.Aggregates()), "<", set.rev+1).WithPrefix()}
	var ops []clientv3.Op
	for _, a := range old {
		given := *a
		given.ID = next
		next++
		ops = append(ops, clientv3.OpPut(s.keys.Aggregate(a.UUID), etcdschema.MustEncode(&given)))
	}
	cmp, op := s.claimIDs(set, next-1)
	resp, err := s.cli.Txn(ctx).If(append(cmps, cmp)...).Then(append(ops, op)...).Commit()
	if err != nil {
		return fmt.Errorf("give ids to aggregates written before ids: %w", err)
	}
	if resp.Succeeded {
		s.log.Info("gave integer ids to aggregates written before them", "aggregates", len(old), "last_id", next-1)
	}
	return nil
}
