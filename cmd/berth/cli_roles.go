package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/logging"
	"github.com/berth-project/berth/internal/stack"
)

// loadRoleConfig reads -config and checks the role's requirements before
// anything touches etcd.
func loadRoleConfig(name string, args []string, stderr io.Writer) (*configs.Config, hclog.Logger, bool) {
	fs := flag.NewFlagSet("berth "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "HCL config file (required)")
	if err := fs.Parse(args); err != nil {
		return nil, nil, false
	}
	if *path == "" {
		fmt.Fprintf(stderr, "berth %s: -config FILE is required\n", name)
		return nil, nil, false
	}
	cfg, err := configs.Load(*path)
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

// cmdRole is `berth server|conductor|agent|etcd -config FILE`: the role's
// process, run by package stack until a signal.
func cmdRole(role string, start stack.StartFunc, args []string, stdout, stderr io.Writer) int {
	cfg, log, ok := loadRoleConfig(role, args, stderr)
	if !ok {
		return 2
	}
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
		return 1
	}
	return 0
}
