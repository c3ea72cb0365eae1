package agent

import (
	"maps"
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// DefaultProviderRefresh is how long the provider sync trusts what it last read
// or wrote of its provider before it reads the provider again: Nova's
// resource_provider_association_refresh (300 s). Nova's report client
// keeps a ProviderTree of what it knows Placement has and calls Placement
// only for what differs from it, re-reading the provider once the
// refresh is due; every update_available_resource still reads the host's
// instances (providerTick does too). An agent that read its provider at
// every provider sync cost etcd a range a host a minute (1,667 a second
// at 100,000 hosts) to learn, almost always, that nothing had changed.
//
// What waits for the refresh: a change made to the provider behind the
// agent's back (an operator's inventory edit is put back, a provider
// deleted from Placement is created again) within the refresh, not
// within one provider_sync_interval. What does not: a change of the
// host's own inventory or of its service's disabled flag, which differs
// from what was seen and so reaches Placement at once.
//
// It is the default of Config.ProviderRefresh, the agent block's
// resource_provider_association_refresh.
const DefaultProviderRefresh = 300 * time.Second

// NeverRefreshProvider, as Config.ProviderRefresh, trusts what the agent
// last read or wrote of its provider until a sync fails (which forgets
// it): Nova's resource_provider_association_refresh = 0, which loads the
// provider once and never refreshes it on its own. A change of the
// host's inventory or disabled flag still reaches Placement at once.
const NeverRefreshProvider time.Duration = -1

// seenProvider is what the agent's provider had when the agent last read
// or wrote it: its inventories and whether it had the disabled trait.
type seenProvider struct {
	at       time.Time // zero: nothing known
	inv      map[string]etcdschema.Inventory
	disabled bool
}

// providerIsAsSeen says whether the provider was seen with inv and the
// disabled trait as wanted within the refresh (ever, with
// NeverRefreshProvider): then a sync has nothing to write and need not
// read it.
func (a *Agent) providerIsAsSeen(inv map[string]etcdschema.Inventory, disabled bool) bool {
	a.seenMu.Lock()
	defer a.seenMu.Unlock()
	s := a.seen
	fresh := a.cfg.ProviderRefresh < 0 || time.Since(s.at) < a.cfg.ProviderRefresh
	return !s.at.IsZero() && fresh && s.disabled == disabled && maps.Equal(s.inv, inv)
}

// sawProvider notes what the provider has after a sync read or wrote it
// (nil inv: forget it, after a sync that failed).
func (a *Agent) sawProvider(inv map[string]etcdschema.Inventory, disabled bool) {
	a.seenMu.Lock()
	defer a.seenMu.Unlock()
	if inv == nil {
		a.seen = seenProvider{}
		return
	}
	a.seen = seenProvider{at: time.Now(), inv: inv, disabled: disabled}
}
