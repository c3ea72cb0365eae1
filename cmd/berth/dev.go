package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/logging"
)

// Simulated hosts' inventory when the config gives none: a mid-size
// hypervisor, the same for every host so labs are predictable.
const (
	devVCPUs    = 16
	devMemoryMB = 65536
	devDiskGB   = 1000
)

func cmdDev(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("berth dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		dataDir   = fs.String("data-dir", "", "etcd data dir (default: a fresh temp dir, removed at exit)")
		etcdAddr  = fs.String("etcd", "127.0.0.1:2379", "embedded etcd client address")
		peerAddr  = fs.String("etcd-peer", "127.0.0.1:2380", "embedded etcd peer address")
		apiAddr   = fs.String("api", "127.0.0.1:8774", "compute API address")
		placeAddr = fs.String("placement", "127.0.0.1:8778", "Placement API address")
		// Port 0: the in-process superconductor calls its scheduler
		// directly, so dev needs no fixed scheduler port.
		schedAddr = fs.String("scheduler", "127.0.0.1:0", "scheduler (select_destinations) address")
		hosts     = fs.Int("hosts", 8, "simulated compute hosts")
		cells     = fs.Int("cells", 2, "cells; hosts are spread round-robin")
		cfgPath   = fs.String("config", "", "HCL config for everything else (log, scheduler, agent template...)")
		failHosts = fs.String("fail-hosts", "", "comma-separated hosts whose builds always fail (reschedulable)")
		buildTime = fs.Duration("build-time", 0, "how long each simulated build takes")
		logLevel  = fs.String("log-level", "", "override the log level (trace, debug, info, warn, error)")
	)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *hosts < 1 || *cells < 1 {
		fmt.Fprintln(stderr, "berth dev: -hosts and -cells must be at least 1")
		return 2
	}
	cfg := configs.Defaults()
	if *cfgPath != "" {
		var err error
		if cfg, err = configs.Load(*cfgPath); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if err := cfg.Require("dev"); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	cfg.EnableAllRoles()
	if *logLevel != "" {
		cfg.Log.Level = *logLevel
	}
	log := logging.New(cfg.Log, stderr).Named("dev")

	// Flags win over the file for what they name.
	if cfg.Etcd.Embedded == nil {
		cfg.Etcd.Embedded = configs.Defaults().Etcd.Embedded
		cfg.Etcd.Endpoints = nil
	}
	emb := cfg.Etcd.Embedded
	emb.ClientURL = "http://" + *etcdAddr
	emb.PeerURL = "http://" + *peerAddr
	if *dataDir != "" {
		emb.DataDir = *dataDir
	} else {
		tmp, err := os.MkdirTemp("", "berth-dev-")
		if err != nil {
			fmt.Fprintln(stderr, "berth dev:", err)
			return 1
		}
		defer os.RemoveAll(tmp)
		emb.DataDir = filepath.Join(tmp, "etcd")
	}
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind = *apiAddr, *placeAddr, *schedAddr

	failing := map[string]bool{}
	for _, h := range strings.Split(*failHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			failing[h] = true
		}
	}
	return startAndWait("dev", cfg, log, stdout, func(ctx context.Context, s *stack) error {
		if err := s.startServerRoles(ctx); err != nil {
			return err
		}
		for c := 1; c <= *cells; c++ {
			cc := *cfg.Conductor
			cc.Cell = fmt.Sprintf("cell%d", c)
			if err := s.startConductor(ctx, &cc); err != nil {
				return err
			}
		}
		for h := 1; h <= *hosts; h++ {
			a := *cfg.Agent
			a.Host = fmt.Sprintf("compute-%d", h)
			a.Cell = fmt.Sprintf("cell%d", (h-1)%*cells+1)
			if a.Inventory.VCPUs == 0 {
				a.Inventory.VCPUs = devVCPUs
			}
			if a.Inventory.MemoryMB == 0 {
				a.Inventory.MemoryMB = devMemoryMB
			}
			if a.Inventory.DiskGB == 0 {
				a.Inventory.DiskGB = devDiskGB
			}
			if *buildTime > 0 {
				a.Fake.BuildTime = *buildTime
			}
			if failing[a.Host] {
				a.Fake.Fail, a.Fake.FailReschedulable = true, true
			}
			if err := s.startAgent(ctx, &a, emb.DataDir); err != nil {
				return err
			}
		}
		s.Endpoints = append(s.Endpoints, [2]string{"hosts", fmt.Sprintf("%d simulated in %d cell(s), data in %s", *hosts, *cells, emb.DataDir)})
		return nil
	})
}
