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

func configsValidate(paths []string, role string, w io.Writer) bool {
	return configs.ValidateFiles(paths, role, w)
}

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
	s, err := connectUnlessSignalled(cfg, log, sig)
	if err != nil {
		log.Error("cannot reach etcd", "error", err)
		return 1
	}
	if err := s.serveStatus(); err != nil {
		log.Error("start failed", "error", err)
		s.stop()
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

// connectUnlessSignalled is connect that a signal interrupts: an etcd
// member of a cluster can wait minutes for its peers, and Ctrl-C must not
// wait with it.
func connectUnlessSignalled(cfg *configs.Config, log hclog.Logger, sig <-chan os.Signal) (*stack, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	interrupted := make(chan os.Signal, 1)
	go func() {
		select {
		case got := <-sig:
			interrupted <- got
			cancel()
		case <-done:
		}
	}()
	s, err := connect(ctx, cfg, log)
	close(done)
	select {
	case got := <-interrupted:
		if s != nil {
			s.stop()
		}
		return nil, fmt.Errorf("interrupted by %s while starting", got)
	default:
	}
	return s, err
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

// cmdEtcd runs one etcd member and nothing else: the control plane's
// cluster, three or five of these, without a separately installed etcd.
func cmdEtcd(args []string, stdout, stderr io.Writer) int {
	cfg, log, ok := loadRoleConfig(configs.RoleEtcd, args, stderr)
	if !ok {
		return 2
	}
	m := cfg.Etcd.Embedded
	log.Info("starting etcd member", "member", m.Name, "client_url", m.ClientURL, "peer_url", m.PeerURL,
		"initial_cluster", m.InitialCluster, "data_dir", m.DataDir)
	return startAndWait(configs.RoleEtcd, cfg, log, stdout, func(ctx context.Context, s *stack) error {
		go func() {
			// A member that loses its storage or is removed from the
			// cluster stops serving: the process must say so and exit.
			if err, ok := <-s.etcd.Err(); ok && err != nil {
				s.errs <- fmt.Errorf("etcd member: %w", err)
			}
		}()
		return nil
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
