package compute

import (
	"context"
	"sort"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
)

// SetHosts gives the API the host store its os-services, os-hypervisors
// and os-availability-zone resources read and change (one with placement,
// so that a service delete can remove the compute node provider), and how
// long a disable or enable waits for the agent's trait.
func (a *API) SetHosts(h *hosts.Store, traitWait time.Duration) {
	a.hosts, a.traitWait = h, traitWait
}

// serviceRecord is one row of Nova's services table as Berth has it: a
// compute host (host set) or a control service.
type serviceRecord struct {
	binary, host string
	id           int64
	uuid         string
	zone         string
	disabled     bool
	reason       string
	forcedDown   bool
	up           bool
	updated      time.Time
	h            *hosts.Host // nil for a control service
}

// hostSnapshot is one read of every host, its provider and zone.
type hostSnapshot struct {
	services  []*serviceRecord // by id, as Nova's service_get_all
	providers map[string]*etcdschema.Provider
}

// readServices reads every service: the control services (in the
// internal zone) and the compute hosts (in their aggregates' zone), in
// id order. withProviders also reads the compute node providers.
func (a *API) readServices(ctx context.Context, withProviders bool) (*hostSnapshot, error) {
	all, rev, err := a.hosts.Read(ctx)
	if err != nil {
		return nil, err
	}
	zones, err := a.hosts.Zones(ctx)
	if err != nil {
		return nil, err
	}
	controls, err := a.hosts.Controls(ctx)
	if err != nil {
		return nil, err
	}
	snap := &hostSnapshot{}
	for _, c := range controls {
		snap.services = append(snap.services, &serviceRecord{binary: c.Binary, host: c.Host, id: c.CreateRev,
			uuid: c.UUID(), zone: hosts.InternalZone, up: true, updated: c.Started})
	}
	for _, h := range all {
		snap.services = append(snap.services, computeRecord(h, zones.Of(h.Service.Host)))
	}
	sort.Slice(snap.services, func(i, j int) bool { return snap.services[i].id < snap.services[j].id })
	if withProviders {
		if snap.providers, err = a.hosts.Providers(ctx, rev); err != nil {
			return nil, err
		}
	}
	return snap, nil
}

func computeRecord(h *hosts.Host, zone string) *serviceRecord {
	return &serviceRecord{binary: "nova-compute", host: h.Service.Host, id: h.ID(), uuid: h.UUID(), zone: zone,
		disabled: h.Service.Disabled, reason: h.Service.DisabledReason, forcedDown: h.Service.ForcedDown,
		up: h.Up(), updated: h.Service.UpdatedAt, h: h}
}

// computes are the nova-compute services of snap.
func (snap *hostSnapshot) computes() []*serviceRecord {
	var out []*serviceRecord
	for _, s := range snap.services {
		if s.h != nil {
			out = append(out, s)
		}
	}
	return out
}

// pyTime is a naive datetime's isoformat as Nova's JSON shows it
// (microseconds always, no zone), or null.
func pyTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000")
}
