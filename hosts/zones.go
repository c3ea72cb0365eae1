package hosts

import (
	"context"
	"fmt"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// InternalZone is Nova's internal_service_availability_zone: the zone of
// every service that is not a nova-compute.
const InternalZone = "internal"

// Aggregates reads every aggregate, by uuid, with its mod revision.
func (s *Store) Aggregates(ctx context.Context) (map[string]*etcdschema.Aggregate, map[string]int64, error) {
	resp, err := s.cli.Get(ctx, s.keys.Aggregates(), clientv3.WithPrefix())
	if err != nil {
		return nil, nil, fmt.Errorf("read aggregates: %w", err)
	}
	out, mods := map[string]*etcdschema.Aggregate{}, map[string]int64{}
	for _, kv := range resp.Kvs {
		var a etcdschema.Aggregate
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &a); err != nil {
			s.log.Warn("skipping unreadable aggregate", "error", err)
			continue
		}
		out[a.UUID], mods[a.UUID] = &a, kv.ModRevision
	}
	return out, mods, nil
}

// ZoneNames is every zone a request may name: the default one and those
// of the aggregates.
func (s *Store) ZoneNames(ctx context.Context) (map[string]bool, error) {
	aggs, _, err := s.Aggregates(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{s.Zone(): true}
	for _, a := range aggs {
		if z := a.AvailabilityZone(); z != "" {
			out[z] = true
		}
	}
	return out, nil
}

// Zones places compute hosts in availability zones, as Nova's
// set_availability_zones does for nova-compute services.
type Zones struct {
	byHost      map[string][]string
	defaultZone string
}

// Zones reads the aggregates once to answer Of for any host.
func (s *Store) Zones(ctx context.Context) (*Zones, error) {
	aggs, _, err := s.Aggregates(ctx)
	if err != nil {
		return nil, err
	}
	z := &Zones{byHost: map[string][]string{}, defaultZone: s.Zone()}
	for _, a := range aggs {
		zone := a.AvailabilityZone()
		if zone == "" {
			continue
		}
		for _, h := range a.Hosts {
			if !containsString(z.byHost[h], zone) {
				z.byHost[h] = append(z.byHost[h], zone)
			}
		}
	}
	for _, zs := range z.byHost {
		sort.Strings(zs)
	}
	return z, nil
}

// Of is the zone of a compute host: its AZ aggregates' zone, the zones
// joined with "," when (against the rules) it is in several, or the
// default zone.
func (z *Zones) Of(host string) string {
	if zs := z.byHost[host]; len(zs) > 0 {
		return strings.Join(zs, ",")
	}
	return z.defaultZone
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
