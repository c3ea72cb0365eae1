package compute

import (
	"net/http"
	"sort"

	"github.com/berth-project/berth/hosts"
)

// Nova's os-availability-zone (availability_zone.py and
// nova/availability_zones.py): a zone is available when one enabled
// service is in it; a zone whose services are all disabled is listed as
// not available. Compute hosts are in their AZ aggregates' zone or the
// default zone, control services in the internal zone, which the
// summary hides.

// zoneSets is get_availability_zones: the sorted zones with an enabled
// service, and the sorted zones with only disabled ones.
func zoneSets(services []*serviceRecord) (available, notAvailable []string) {
	on, off := map[string]bool{}, map[string]bool{}
	for _, s := range services {
		if !s.disabled {
			on[s.zone] = true
		}
	}
	for _, s := range services {
		if s.disabled && !on[s.zone] {
			off[s.zone] = true
		}
	}
	return sortedSet(on), sortedSet(off)
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (a *API) listAvailabilityZones(c *reqCtx) (int, any, error) {
	snap, err := a.readServices(c.r.Context(), false)
	if err != nil {
		return 0, nil, err
	}
	on, off := zoneSets(snap.services)
	list := []obj{}
	for _, set := range []struct {
		zones     []string
		available bool
	}{{on, true}, {off, false}} {
		for _, z := range set.zones {
			if z == hosts.InternalZone {
				continue
			}
			list = append(list, obj{{"zoneName", z}, {"zoneState", obj{{"available", set.available}}}, {"hosts", nil}})
		}
	}
	return http.StatusOK, obj{{"availabilityZoneInfo", list}}, nil
}

// listAvailabilityZonesDetail is _describe_availability_zones_verbose:
// each available zone with its hosts and their enabled services (hosts
// by name: Nova's order is a Python set's), then the zones that are not
// available, without hosts.
func (a *API) listAvailabilityZonesDetail(c *reqCtx) (int, any, error) {
	snap, err := a.readServices(c.r.Context(), false)
	if err != nil {
		return 0, nil, err
	}
	on, off := zoneSets(snap.services)
	list := []obj{}
	for _, z := range on {
		byHost := map[string]obj{}
		for _, s := range snap.services {
			if s.disabled || s.zone != z {
				continue
			}
			byHost[s.host] = append(byHost[s.host], member{s.binary, obj{{"available", s.up}, {"active", true},
				{"updated_at", pyTime(s.updated)}}})
		}
		names := make([]string, 0, len(byHost))
		for h := range byHost {
			names = append(names, h)
		}
		sort.Strings(names)
		hs := obj{}
		for _, h := range names {
			hs = append(hs, member{h, byHost[h]})
		}
		list = append(list, obj{{"zoneName", z}, {"zoneState", obj{{"available", true}}}, {"hosts", hs}})
	}
	for _, z := range off {
		list = append(list, obj{{"zoneName", z}, {"zoneState", obj{{"available", false}}}, {"hosts", nil}})
	}
	return http.StatusOK, obj{{"availabilityZoneInfo", list}}, nil
}
