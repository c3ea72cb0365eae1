package stack

import (
	"context"
	"fmt"
	"time"
)

// Simulated hosts' inventory when the config gives none: a mid-size
// hypervisor, the same for every host so labs are predictable.
const (
	DevVCPUs    = 16
	DevMemoryMB = 65536
	DevDiskGB   = 1000
)

// DevOptions is what `berth dev` adds to its config: simulated hosts
// spread over cells, each an agent with the fake driver.
type DevOptions struct {
	Hosts, Cells int
	// FailHosts are hosts whose builds always fail (reschedulable).
	FailHosts map[string]bool
	// BuildTime, when positive, is how long each simulated build takes.
	BuildTime time.Duration
	// DataDir is where the agents keep their state (the etcd data dir).
	DataDir string
	// Login, when set, is printed in the banner: the dev identity's
	// credentials, so a developer can log in at once.
	Login string
}

// Dev starts everything in one process: the server roles, a conductor
// per cell (cell1, cell2, ...) and the hosts compute-1, compute-2, ...
// round-robin over the cells, from the config's conductor and agent
// blocks as templates.
func Dev(o DevOptions) StartFunc {
	return func(ctx context.Context, s *Stack) error {
		cfg := s.cfg
		if err := s.StartServerRoles(ctx); err != nil {
			return err
		}
		for c := 1; c <= o.Cells; c++ {
			cc := *cfg.Conductor
			cc.Cell = fmt.Sprintf("cell%d", c)
			if err := s.StartConductor(ctx, &cc); err != nil {
				return err
			}
		}
		for h := 1; h <= o.Hosts; h++ {
			a := *cfg.Agent
			a.Host = fmt.Sprintf("compute-%d", h)
			a.Cell = fmt.Sprintf("cell%d", (h-1)%o.Cells+1)
			if a.Inventory.VCPUs == 0 {
				a.Inventory.VCPUs = DevVCPUs
			}
			if a.Inventory.MemoryMB == 0 {
				a.Inventory.MemoryMB = DevMemoryMB
			}
			if a.Inventory.DiskGB == 0 {
				a.Inventory.DiskGB = DevDiskGB
			}
			if o.BuildTime > 0 {
				a.Fake.BuildTime = o.BuildTime
			}
			if o.FailHosts[a.Host] {
				a.Fake.Fail, a.Fake.FailReschedulable = true, true
			}
			if err := s.StartAgent(ctx, &a, o.DataDir); err != nil {
				return err
			}
		}
		if o.Login != "" {
			s.Endpoints = append(s.Endpoints, [2]string{"login", o.Login})
		}
		s.Endpoints = append(s.Endpoints, [2]string{"hosts", fmt.Sprintf("%d simulated in %d cell(s), data in %s", o.Hosts, o.Cells, o.DataDir)})
		return nil
	}
}
