package scheduler

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/placement"
)

// logBuffer is a log sink the test reads while the scheduler writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// emptyPlacement is a cloud of hosts a and b whose agents reported their
// capacities (b's VCPUs all used, but more RAM free, so the RAM weigher
// would take b if the legacy filters did not refuse it) and whose
// providers were then deleted: Placement has no provider at all.
func emptyPlacement(t *testing.T) *cloud {
	c := newCloud(t)
	for _, h := range []struct {
		name        string
		used, ramMB int64
	}{{"a", 1, 4096}, {"b", 8, 0}} {
		c.addHost(h.name, "cell1", 8, 8192, false)
		inv := etcdschema.Inventory{Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1}
		ram := etcdschema.Inventory{Total: 8192, MinUnit: 1, MaxUnit: 8192, StepSize: 1, AllocationRatio: 1}
		c.put(c.keys.HostCapacity(h.name), &etcdschema.HostCapacity{Host: h.name,
			Inventories: map[string]etcdschema.Inventory{placement.VCPU: inv, placement.MemoryMB: ram},
			Used:        map[string]int64{placement.VCPU: h.used, placement.MemoryMB: h.ramMB}})
	}
	testwait.Until(t, "both capacity reports seen", func() bool {
		n := 0
		for _, fv := range c.hosts.fallbackViews() {
			if fv.capacity.reported {
				n++
			}
		}
		return n == 2
	})
	for _, h := range []string{"a", "b"} {
		if err := c.place.DeleteProvider(c.ctx, "rp-"+h); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Until(t, "placement empty", func() bool { return c.place.ProviderCount() == 0 })
	return c
}

// recreate puts host's provider back as its agent's provider sync does.
func (c *cloud) recreate(host string) {
	c.t.Helper()
	rp := "rp-" + host
	if err := c.place.EnsureProvider(c.ctx, rp, host, ""); err != nil {
		c.t.Fatal(err)
	}
	err := c.place.UpdateProvider(c.ctx, rp, func(p *etcdschema.Provider) error {
		p.Inventories = map[string]etcdschema.Inventory{
			placement.VCPU:     {Total: 8, MinUnit: 1, MaxUnit: 8, StepSize: 1, AllocationRatio: 1},
			placement.MemoryMB: {Total: 8192, MinUnit: 1, MaxUnit: 8192, StepSize: 1, AllocationRatio: 1},
		}
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// TestEmptyPlacementFallback: with every provider deleted and the agents'
// capacities present, a build is NoValidHost with the fallback off (as
// today); with it on it is scheduled over the host manager's hosts, the
// legacy filters keep it off b (full by its report), and its claim waits
// until a's provider is back, then lands there.
func TestEmptyPlacementFallback(t *testing.T) {
	c := emptyPlacement(t)
	cfg := DefaultConfig()
	cfg.Weights = map[string]float64{"ram": 1}

	t.Run("off: NoValidHost", func(t *testing.T) {
		s := c.scheduler(cfg)
		_, err := s.SelectDestinations(c.ctx, spec(1, 256, "off-1"))
		var nvh *NoValidHostError
		if !errors.As(err, &nvh) {
			t.Fatalf("fallback off: %v, want NoValidHost", err)
		}
	})

	t.Run("on: bounded wait, then NoValidHost", func(t *testing.T) {
		on := cfg
		on.EmptyPlacementFallback, on.FallbackProviderWait = true, 200*time.Millisecond
		s := c.scheduler(on)
		start := time.Now()
		_, err := s.SelectDestinations(c.ctx, spec(1, 256, "bounded-1"))
		var nvh *NoValidHostError
		if !errors.As(err, &nvh) {
			t.Fatalf("no provider ever came back: %v, want NoValidHost", err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("the claim waited %s, past its bound", d)
		}
	})

	t.Run("on: lands once the provider is back", func(t *testing.T) {
		on := cfg
		on.EmptyPlacementFallback, on.FallbackProviderWait = true, time.Minute
		logs := &logBuffer{}
		s, err := New(on, c.place, c.hosts, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}))
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			sels [][]etcdschema.Selection
			err  error
		}
		done := make(chan result, 1)
		ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
		defer cancel()
		go func() {
			sels, err := s.SelectDestinations(ctx, spec(1, 256, "fb-1"))
			done <- result{sels, err}
		}()
		testwait.Until(t, "the claim waiting for a's provider", func() bool {
			return strings.Contains(logs.String(), "waiting for the host's resource provider to appear") &&
				strings.Contains(logs.String(), "host=a")
		})
		if !strings.Contains(logs.String(), "reason=placement_empty") || !strings.Contains(logs.String(), "fallback=true") {
			t.Errorf("the fallback's reason was not logged with its keys:\n%s", logs)
		}
		c.recreate("a")
		r := <-done
		if r.err != nil {
			t.Fatalf("fallback select: %v\n%s", r.err, logs)
		}
		if got := r.sels[0][0].ServiceHost; got != "a" {
			t.Fatalf("landed on %s, want a (b is full by its report)", got)
		}
		if got := c.usage("a"); got != 1 {
			t.Errorf("a's provider uses %d VCPU, want the claim's 1", got)
		}
	})
}
