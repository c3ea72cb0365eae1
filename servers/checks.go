package servers

import (
	"context"
	"fmt"
	"sort"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// The API-time checks of a create, as Nova's API makes them before it
// stores anything. Each answers a typed error its API words its own way.

// ZoneError is a requested availability zone that does not exist.
type ZoneError struct {
	Zone  string
	Zones []string // every zone there is, sorted
}

func (e *ZoneError) Error() string { return fmt.Sprintf("availability zone %q does not exist", e.Zone) }

// GroupError is a group hint naming no server group.
type GroupError struct{ Group string }

func (e *GroupError) Error() string { return fmt.Sprintf("server group %s does not exist", e.Group) }

// HostError is a requested host or hypervisor_hostname that is not a
// compute host, or a pair that disagree.
type HostError struct {
	Host, Node string
	// Mismatch: both were given and name different hosts (Berth has one
	// node a host, named as the host).
	Mismatch bool
}

func (e *HostError) Error() string {
	switch {
	case e.Mismatch:
		return fmt.Sprintf("compute host %s has no node %s", e.Host, e.Node)
	case e.Host != "":
		return fmt.Sprintf("compute host %s does not exist", e.Host)
	}
	return fmt.Sprintf("hypervisor hostname %s does not exist", e.Node)
}

// HintError is a scheduler hint whose value is not a server or group
// uuid. Those values reach etcd keys (a group's members, the instances
// the scheduler reads): "<uuid>/members/<uuid>" must never become one.
type HintError struct {
	Hint, Value string
}

func (e *HintError) Error() string {
	return fmt.Sprintf("scheduler hint %s: %q is not a uuid", e.Hint, e.Value)
}

// canonicalUUID: a uuid in its one canonical spelling (lower case, with
// hyphens), the only one the records' keys use.
func canonicalUUID(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && u.String() == s
}

// ValidateHints checks that every hint value that names a group or a
// server is a canonical uuid. It returns a *HintError for the first that
// is not.
func ValidateHints(h etcdschema.SchedulerHints) error {
	if h.Group != "" && !canonicalUUID(h.Group) {
		return &HintError{Hint: "group", Value: h.Group}
	}
	for _, list := range []struct {
		hint   string
		values []string
	}{{"same_host", h.SameHost}, {"different_host", h.DifferentHost}} {
		for _, v := range list.values {
			if !canonicalUUID(v) {
				return &HintError{Hint: list.hint, Value: v}
			}
		}
	}
	return nil
}

// AvailabilityZones is every zone a request may name: the default one
// and those of the aggregates.
func (s *Store) AvailabilityZones(ctx context.Context) (map[string]bool, error) {
	resp, err := s.cli.Get(ctx, s.keys.Aggregates(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read aggregates: %w", err)
	}
	out := map[string]bool{s.DefaultZone(): true}
	for _, kv := range resp.Kvs {
		var a etcdschema.Aggregate
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &a); err != nil {
			return nil, err
		}
		if z := a.AvailabilityZone(); z != "" {
			out[z] = true
		}
	}
	return out, nil
}

// HostZone is the availability zone of host's aggregates ("" for none
// set) and whether host is in any aggregate at all. Berth keeps one zone
// per host (the aggregates API refuses a second), so the first zone
// found is the host's.
func (s *Store) HostZone(ctx context.Context, host string) (zone string, aggregated bool, err error) {
	resp, err := s.cli.Get(ctx, s.keys.Aggregates(), clientv3.WithPrefix())
	if err != nil {
		return "", false, fmt.Errorf("read aggregates: %w", err)
	}
	for _, kv := range resp.Kvs {
		var a etcdschema.Aggregate
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &a); err != nil {
			return "", false, err
		}
		if a.HasHost(host) {
			aggregated = true
			if zone == "" {
				zone = a.AvailabilityZone()
			}
		}
	}
	return zone, aggregated, nil
}

// CheckPlacement checks what a create asks of the scheduler: the zone
// must exist (the default one or an aggregate's, as Nova's API checks)
// and a group hint must name a group. It returns a *HintError, a
// *ZoneError, a *GroupError, or the store's error.
func (s *Store) CheckPlacement(ctx context.Context, az string, h etcdschema.SchedulerHints) error {
	if err := ValidateHints(h); err != nil {
		return err // before any key is spelled from a hint
	}
	if az != "" {
		zones, err := s.AvailabilityZones(ctx)
		if err != nil {
			return err
		}
		if !zones[az] {
			names := make([]string, 0, len(zones))
			for z := range zones {
				names = append(names, z)
			}
			sort.Strings(names)
			return &ZoneError{Zone: az, Zones: names}
		}
	}
	if h.Group != "" {
		resp, err := s.cli.Get(ctx, s.keys.ServerGroup(h.Group), clientv3.WithCountOnly())
		if err != nil {
			return fmt.Errorf("read server group %s: %w", h.Group, err)
		}
		if resp.Count == 0 {
			return &GroupError{Group: h.Group}
		}
	}
	return nil
}

// CheckRequestedHost is Nova's API check of a requested host and
// hypervisor_hostname: each must name a known compute host (Berth has
// one node per host, named as the host), and they must agree. It returns
// a *HostError or the store's error.
func (s *Store) CheckRequestedHost(ctx context.Context, host, node string) error {
	if host == "" && node == "" {
		return nil
	}
	if host != "" && node != "" && host != node {
		return &HostError{Host: host, Node: node, Mismatch: true}
	}
	name := host
	if name == "" {
		name = node
	}
	resp, err := s.cli.Get(ctx, s.keys.Service(name), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("look up compute host %s: %w", name, err)
	}
	if resp.Count == 0 {
		return &HostError{Host: host, Node: node}
	}
	return nil
}

// FindFlavor reads a flavor by name, or by id as Nova's flavorRef names
// it. ErrNotFound when there is none.
func (s *Store) FindFlavor(ctx context.Context, ref string) (*etcdschema.Flavor, error) {
	key := s.keys.Flavor(ref)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read flavor %s: %w", ref, err)
	}
	if len(resp.Kvs) == 0 {
		all, err := s.cli.Get(ctx, s.keys.Flavors(), clientv3.WithPrefix())
		if err != nil {
			return nil, fmt.Errorf("list flavors: %w", err)
		}
		for _, kv := range all.Kvs {
			var f etcdschema.Flavor
			if etcdschema.Decode(string(kv.Key), kv.Value, &f) == nil && f.ID == ref {
				return &f, nil
			}
		}
		return nil, ErrNotFound
	}
	var f etcdschema.Flavor
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &f); err != nil {
		return nil, err
	}
	return &f, nil
}
