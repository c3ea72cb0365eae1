package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/logging"
)

func configsValidate(paths []string, w io.Writer) bool { return configs.ValidateFiles(paths, w) }

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

func signals() <-chan os.Signal {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	return ch
}

func startAndWait(name string, cfg *configs.Config, log hclog.Logger, stdout io.Writer,
	start func(ctx context.Context, s *stack) error) int {
	sig := signals()
	s, err := connect(cfg, log)
	if err != nil {
		log.Error("cannot reach etcd", "error", err)
		return 1
	}
	if err := start(context.Background(), s); err != nil {
		log.Error("start failed", "error", err)
		s.stop()
		return 1
	}
	for _, ep := range s.Endpoints {
		fmt.Fprintf(stdout, "%-12s %s\n", ep[0], ep[1])
	}
	log.Info(name + " running")
	if err := s.wait(sig); err != nil {
		return 1
	}
	return 0
}

func cmdServerRole(args []string, stdout, stderr io.Writer) int {
	cfg, log, ok := loadRoleConfig("server", args, stderr)
	if !ok {
		return 2
	}
	return startAndWait("server", cfg, log, stdout, func(ctx context.Context, s *stack) error {
		return s.startServerRoles(ctx)
	})
}

func cmdConductor(args []string, stdout, stderr io.Writer) int {
	cfg, log, ok := loadRoleConfig("conductor", args, stderr)
	if !ok {
		return 2
	}
	return startAndWait("conductor", cfg, log, stdout, func(ctx context.Context, s *stack) error {
		return s.startConductor(ctx, cfg.Conductor)
	})
}

func cmdAgent(args []string, stdout, stderr io.Writer) int {
	cfg, log, ok := loadRoleConfig("agent", args, stderr)
	if !ok {
		return 2
	}
	return startAndWait("agent", cfg, log, stdout, func(ctx context.Context, s *stack) error {
		return s.startAgent(ctx, cfg.Agent, "")
	})
}
