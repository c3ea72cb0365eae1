package main

import (
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/logging"
	"github.com/berth-project/berth/internal/stack"
)

// newRunCmd is `berth run server|conductor|agent|etcd --config FILE`.
// The roles live under run so that no word of the command line is both a
// role and a resource (`berth server create` is the CLI; the server role
// is `berth run server`).
func newRunCmd(s *streams) *cobra.Command {
	run := groupCmd("run", "run one of Berth's roles in this process, until SIGINT or SIGTERM")
	run.Long = "Run one of Berth's roles in this process, until SIGINT or SIGTERM, with the\n" +
		"settings of an HCL config file (see configs/examples and 'berth config render')."
	for _, r := range []struct {
		role, short string
		start       stack.StartFunc
	}{
		{configs.RoleServer, "api, placement, scheduler, superconductor, identity and image roles, as the file enables", stack.Server},
		{configs.RoleConductor, "a cell conductor", stack.Conductor},
		{configs.RoleAgent, "a compute host agent", stack.Agent},
		{configs.RoleEtcd, "one member of Berth's etcd cluster (embedded etcd, no other install)", stack.EtcdMember},
	} {
		var path string
		c := &cobra.Command{
			Use:   r.role + " --config FILE",
			Short: r.short,
			Args:  exactArgs(),
			RunE: func(*cobra.Command, []string) error {
				if path == "" {
					return usageErrorf("--config FILE is required")
				}
				return codeErr(cmdRole(r.role, r.start, path, s.out, s.err))
			},
		}
		c.Flags().StringVar(&path, "config", "", "HCL config file (required)")
		run.AddCommand(c)
	}
	return run
}

// loadRoleConfig reads the config and checks the role's requirements
// before anything touches etcd.
func loadRoleConfig(name, path string, stderr io.Writer) (*configs.Config, hclog.Logger, bool) {
	cfg, err := configs.Load(path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil, false
	}
	if err := cfg.Require(name); err != nil {
		fmt.Fprintln(stderr, err)
		return nil, nil, false
	}
	return cfg, logging.New(cfg.Log, stderr).Named(name), true
}

// cmdRole is `berth run ROLE --config FILE`: the role's process, run by
// package stack until a signal.
func cmdRole(role string, start stack.StartFunc, path string, stdout, stderr io.Writer) int {
	cfg, log, ok := loadRoleConfig(role, path, stderr)
	if !ok {
		return exitUsage
	}
	defer applyGC(cfg, log)()
	if role == configs.RoleEtcd {
		m := cfg.Etcd.Embedded
		log.Info("starting etcd member", "member", m.Name, "client_url", m.ClientURL, "peer_url", m.PeerURL,
			"initial_cluster", m.InitialCluster, "data_dir", m.DataDir)
	}
	return exitCode(stack.Run(role, cfg, log, stdout, start))
}

// exitCode is a process's exit status after stack.Run: its error is
// already logged.
func exitCode(err error) int {
	if err != nil {
		return exitFailure
	}
	return exitOK
}
