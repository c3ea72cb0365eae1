package stack

import (
	"context"
	"fmt"
	"time"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/quotas"
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
	// ChangeAgent, when set, changes each host's agent config last
	// (tests: one host's fake driver failing one operation).
	ChangeAgent func(a *configs.Agent)
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
		quotasNote := devQuotas(cfg)
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
			if o.ChangeAgent != nil {
				o.ChangeAgent(&a)
			}
			if err := s.StartAgent(ctx, &a, o.DataDir); err != nil {
				return err
			}
		}
		if o.Login != "" {
			s.Endpoints = append(s.Endpoints, [2]string{"login", o.Login})
		}
		s.Endpoints = append(s.Endpoints, [2]string{"quotas", quotasNote})
		s.Endpoints = append(s.Endpoints, [2]string{"hosts", fmt.Sprintf("%d simulated in %d cell(s), data in %s", o.Hosts, o.Cells, o.DataDir)})
		return nil
	}
}

// devQuotas makes a dev cloud's projects unlimited unless the config file
// has a quota block: dev is a sandbox for trying the scheduler (a burst
// of 60 servers, a bench), where Nova's default of 10 instances would
// refuse the first experiment. A deployment (berth run server) keeps
// Nova's defaults. It says which on the start-up banner.
func devQuotas(cfg *configs.Config) string {
	if cfg.API == nil {
		return "no compute API"
	}
	if cfg.API.Quota != nil {
		return "from the config file's api { quota } block"
	}
	cfg.API.Quota = map[string]int64{}
	for _, r := range []string{quotas.Instances, quotas.Cores, quotas.RAM, quotas.ServerGroups, quotas.ServerGroupMembers} {
		cfg.API.Quota[r] = quotas.Unlimited
	}
	return "unlimited (dev; an api { quota { ... } } block in -config sets Nova's limits)"
}
