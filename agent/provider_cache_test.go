package agent

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
)

// TestProviderRefreshTrustsWhatWasSeen: a provider sync trusts what it
// last saw of its provider for Config.ProviderRefresh (300 s unless set),
// and for ever with NeverRefreshProvider (Nova's
// resource_provider_association_refresh = 0); a different inventory or
// disabled flag, or nothing seen, is never trusted.
func TestProviderRefreshTrustsWhatWasSeen(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	inv := map[string]etcdschema.Inventory{placement.VCPU: {Total: 4, MinUnit: 1, MaxUnit: 4, StepSize: 1, AllocationRatio: 4}}
	other := map[string]etcdschema.Inventory{placement.VCPU: {Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 4}}
	for _, tc := range []struct {
		desc     string
		refresh  time.Duration // Config.ProviderRefresh
		seen     bool
		age      time.Duration
		inv      map[string]etcdschema.Inventory
		disabled bool
		trusted  bool
	}{
		{desc: "default, just seen", seen: true, inv: inv, trusted: true},
		{desc: "default, seen 299s ago", seen: true, age: 299 * time.Second, inv: inv, trusted: true},
		{desc: "default, seen 301s ago", seen: true, age: 301 * time.Second, inv: inv},
		{desc: "10s, seen 11s ago", refresh: 10 * time.Second, seen: true, age: 11 * time.Second, inv: inv},
		{desc: "10s, seen 9s ago", refresh: 10 * time.Second, seen: true, age: 9 * time.Second, inv: inv, trusted: true},
		{desc: "never, seen a day ago", refresh: NeverRefreshProvider, seen: true, age: 24 * time.Hour, inv: inv, trusted: true},
		{desc: "never, nothing seen", refresh: NeverRefreshProvider, inv: inv},
		{desc: "never, inventory changed", refresh: NeverRefreshProvider, seen: true, inv: other},
		{desc: "never, disabled since", refresh: NeverRefreshProvider, seen: true, inv: inv, disabled: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			a, err := New(Config{Host: "h1", Cell: "cell1", ProviderRefresh: tc.refresh}, cli, keys, nil,
				NewFakeDriver("h1", FakeConfig{}), hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			if tc.refresh == 0 && a.cfg.ProviderRefresh != DefaultProviderRefresh {
				t.Fatalf("default refresh %s, want %s", a.cfg.ProviderRefresh, DefaultProviderRefresh)
			}
			if tc.seen {
				a.sawProvider(inv, false)
				a.seen.at = a.seen.at.Add(-tc.age)
			}
			if got := a.providerIsAsSeen(tc.inv, tc.disabled); got != tc.trusted {
				t.Fatalf("trusted %v, want %v", got, tc.trusted)
			}
		})
	}
}
