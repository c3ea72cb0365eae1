package agent

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// reportCapacity writes the host's HostCapacity (Nova's compute node
// record: what the legacy scheduler filtered on) when it differs from what
// this agent wrote last: the inventories it gives its provider, and what
// the instances its cell places here use, by their flavors (root,
// ephemeral and swap disk as Placement's query counts them). The
// scheduler's empty-Placement fallback reads it while no provider exists;
// it is written at registration and every provider sync.
func (a *Agent) reportCapacity(ctx context.Context) error {
	onHost, err := a.instancesOnHost(ctx)
	if err != nil {
		return err
	}
	return a.writeCapacity(ctx, onHost)
}

// reportCapacityOf is reportCapacity with the host's instance info uuids
// already read (providerTick's one read; instancesOf).
func (a *Agent) reportCapacityOf(ctx context.Context, uuids []string) error {
	onHost, err := a.instancesOf(ctx, uuids)
	if err != nil {
		return err
	}
	return a.writeCapacity(ctx, onHost)
}

// writeCapacity writes the HostCapacity of the instances onHost, unless
// it is what this agent wrote last.
func (a *Agent) writeCapacity(ctx context.Context, onHost map[string]hostInstance) error {
	inv, err := a.inventories()
	if err != nil {
		return err
	}
	used := map[string]int64{}
	for _, hi := range onHost {
		if hi.inst.Status == etcdschema.StatusDeleted {
			continue
		}
		f := hi.inst.Flavor
		used[placement.VCPU] += int64(f.VCPUs)
		used[placement.MemoryMB] += int64(f.RAMMB)
		used[placement.DiskGB] += int64(f.DiskGB) + int64(f.EphemeralGB) + int64((f.SwapMB+1023)/1024)
	}
	a.capacityMu.Lock()
	defer a.capacityMu.Unlock()
	if last := a.lastCapacity; last != nil && maps.Equal(last.Inventories, inv) && maps.Equal(last.Used, used) {
		return nil
	}
	rec := &etcdschema.HostCapacity{Host: a.cfg.Host, Inventories: inv, Used: used, At: time.Now().UTC()}
	if _, err := a.cli.Put(ctx, a.own.capacity, etcdschema.MustEncode(rec)); err != nil {
		return fmt.Errorf("agent %s: write capacity: %w", a.cfg.Host, err)
	}
	a.lastCapacity = rec
	return nil
}
