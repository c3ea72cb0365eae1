package compute

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// flavorStore keeps flavors where Berth always has: one etcdschema.Flavor
// a name, under Keys.Flavor(name), so the /v1 API and `berth server
// create --flavor m1.small` read the same records. Nova finds a flavor
// by its flavorid and keeps both the name and the id unique; Berth has a
// handful of flavors, so a lookup by id lists them all, and a create
// proves both unique by listing at one revision and committing only if
// no flavor changed since (a compare on the whole prefix's mod revision).
type flavorStore struct {
	cli  *clientv3.Client
	keys etcdschema.Keys

	// decoded keeps each flavor record as last decoded, by key, with the
	// mod revision it was decoded at: every server create looks its
	// flavor up by listing them all, and decoding every record's JSON
	// each time was most of that lookup's CPU. A record whose mod
	// revision is unchanged has the same bytes, so it is copied from here
	// instead (a deep copy: callers may change what they get).
	mu      sync.Mutex
	decoded map[string]storedFlavor
}

// storedFlavor is a flavor with the key and revision it was read at.
type storedFlavor struct {
	etcdschema.Flavor
	key    string
	modRev int64
}

// conflictAttempts bounds the optimistic retries of one write: each lost
// race means another writer committed, so the loop always progresses.
const conflictAttempts = 16

// list reads every flavor at one revision. A record this build cannot
// read (a newer version) is an error: listing without it would show a
// flavor list that is not the cloud's.
func (s *flavorStore) list(ctx context.Context) ([]storedFlavor, int64, error) {
	resp, err := s.cli.Get(ctx, s.keys.Flavors(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("list flavors: %w", err)
	}
	out := make([]storedFlavor, 0, len(resp.Kvs))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.decoded == nil {
		s.decoded = map[string]storedFlavor{}
	}
	for _, kv := range resp.Kvs {
		if c, ok := s.decoded[string(kv.Key)]; ok && c.modRev == kv.ModRevision {
			out = append(out, c.clone())
			continue
		}
		sf := storedFlavor{key: string(kv.Key), modRev: kv.ModRevision}
		if err := etcdschema.Decode(sf.key, kv.Value, &sf.Flavor); err != nil {
			return nil, 0, err
		}
		s.decoded[sf.key] = sf.clone()
		out = append(out, sf)
	}
	if len(s.decoded) > len(resp.Kvs) {
		// Flavors were deleted: keep only those listed.
		listed := make(map[string]bool, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			listed[string(kv.Key)] = true
		}
		maps.DeleteFunc(s.decoded, func(k string, _ storedFlavor) bool { return !listed[k] })
	}
	return out, resp.Header.Revision, nil
}

// clone is a copy of sf that shares no map, slice or pointer with it.
func (sf storedFlavor) clone() storedFlavor {
	c := sf
	c.ExtraSpecs = maps.Clone(sf.ExtraSpecs)
	c.Projects = slices.Clone(sf.Projects)
	if sf.Description != nil {
		d := *sf.Description
		c.Description = &d
	}
	return c
}

// flavorNotFound is FlavorNotFound's 404.
func flavorNotFound(id string) *fault { return errNotFound("Flavor " + id + " could not be found.") }

// get is Flavor.get_by_flavor_id.
func (s *flavorStore) get(ctx context.Context, id string) (*storedFlavor, error) {
	all, _, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		if all[i].ID == id {
			return &all[i], nil
		}
	}
	return nil, flavorNotFound(id)
}

// recent is get answered, when it can, from the flavors as last listed
// (decoded), without reading etcd: a server create looks its flavor up
// every time, and that read was a third of a create's reads. The answer
// may be stale (the flavor changed or went since); the create stores its
// servers only while the record is at the answer's modRev
// (servers.CreateRequest.Checked) and asks get afresh otherwise. Every
// other lookup, whose writes compare nothing, uses get.
func (s *flavorStore) recent(ctx context.Context, id string) (*storedFlavor, error) {
	s.mu.Lock()
	for _, sf := range s.decoded {
		if sf.ID == id {
			c := sf.clone()
			s.mu.Unlock()
			return &c, nil
		}
	}
	s.mu.Unlock()
	return s.get(ctx, id)
}

// create stores f if no flavor has its name or its id (409s in Nova's
// words otherwise).
func (s *flavorStore) create(ctx context.Context, f *etcdschema.Flavor) error {
	key := s.keys.Flavor(f.Name)
	val, err := etcdschema.Encode(f)
	if err != nil {
		return err
	}
	for range conflictAttempts {
		all, rev, err := s.list(ctx)
		if err != nil {
			return err
		}
		for _, o := range all {
			if o.ID == f.ID {
				return errConflict("Flavor with ID " + f.ID + " already exists.")
			}
			if o.Name == f.Name {
				return errConflict("Flavor with name " + f.Name + " already exists.")
			}
		}
		resp, err := s.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.ModRevision(s.keys.Flavors()), "<", rev+1).WithPrefix(),
		).Then(clientv3.OpPut(key, string(val))).Commit()
		if err != nil {
			return fmt.Errorf("create flavor %s: %w", f.Name, err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return errors.New("create flavor " + f.Name + ": flavors kept changing; gave up")
}

// update applies change to the flavor id, committing only over the
// record change saw, and returns the flavor as stored.
func (s *flavorStore) update(ctx context.Context, id string, change func(*etcdschema.Flavor) error) (*etcdschema.Flavor, error) {
	for range conflictAttempts {
		sf, err := s.get(ctx, id)
		if err != nil {
			return nil, err
		}
		f := sf.Flavor
		f.ExtraSpecs = cloneMap(f.ExtraSpecs)
		f.Projects = append([]string(nil), f.Projects...)
		if err := change(&f); err != nil {
			return nil, err
		}
		val, err := etcdschema.Encode(&f)
		if err != nil {
			return nil, err
		}
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(sf.key), "=", sf.modRev)).
			Then(clientv3.OpPut(sf.key, string(val))).Commit()
		if err != nil {
			return nil, fmt.Errorf("update flavor %s: %w", id, err)
		}
		if resp.Succeeded {
			return &f, nil
		}
	}
	return nil, errors.New("update flavor " + id + ": it kept changing; gave up")
}

// delete removes the flavor id. Servers keep their own copy of their
// flavor (Embedded), as Nova's instances do.
func (s *flavorStore) delete(ctx context.Context, id string) error {
	for range conflictAttempts {
		sf, err := s.get(ctx, id)
		if err != nil {
			return err
		}
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(sf.key), "=", sf.modRev)).
			Then(clientv3.OpDelete(sf.key)).Commit()
		if err != nil {
			return fmt.Errorf("delete flavor %s: %w", id, err)
		}
		if resp.Succeeded {
			return nil
		}
	}
	return errors.New("delete flavor " + id + ": it kept changing; gave up")
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
