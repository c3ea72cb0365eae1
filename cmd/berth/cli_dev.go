package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/logging"
	"github.com/berth-project/berth/internal/stack"
)

// devFlags are `berth dev`'s flags.
type devFlags struct {
	dataDir, etcdAddr, peerAddr, apiAddr, placeAddr, identAddr, imageAddr, schedAddr string
	hosts, cells                                                                     int
	cfgPath, failHosts, logLevel                                                     string
	buildTime                                                                        time.Duration
}

func newDevCmd(s *streams) *cobra.Command {
	f := &devFlags{}
	c := &cobra.Command{
		Use:   "dev",
		Short: "everything in one process: embedded etcd, every role, simulated hosts",
		Long: "Run every role in one process over an embedded etcd, with simulated compute\n" +
			"hosts spread over cells: a whole Berth to try, with noauth and a dev login.",
		Args: exactArgs(),
		RunE: func(*cobra.Command, []string) error { return codeErr(cmdDev(f, s.out, s.err)) },
	}
	fs := c.Flags()
	fs.StringVar(&f.dataDir, "data-dir", "", "etcd data dir (default: a fresh temp dir, removed at exit)")
	fs.StringVar(&f.etcdAddr, "etcd", "127.0.0.1:2379", "embedded etcd client address")
	fs.StringVar(&f.peerAddr, "etcd-peer", "127.0.0.1:2380", "embedded etcd peer address")
	fs.StringVar(&f.apiAddr, "api", "127.0.0.1:8774", "compute API address")
	fs.StringVar(&f.placeAddr, "placement", "127.0.0.1:8778", "Placement API address")
	fs.StringVar(&f.identAddr, "identity", "127.0.0.1:5000", "identity (Keystone v3) API address")
	fs.StringVar(&f.imageAddr, "image", "127.0.0.1:9292", "image (Glance v2) API address")
	// Port 0: the in-process superconductor calls its scheduler
	// directly, so dev needs no fixed scheduler port.
	fs.StringVar(&f.schedAddr, "scheduler", "127.0.0.1:0", "scheduler (select_destinations) address")
	fs.IntVar(&f.hosts, "hosts", 8, "simulated compute hosts")
	fs.IntVar(&f.cells, "cells", 2, "cells; hosts are spread round-robin")
	fs.StringVar(&f.cfgPath, "config", "", "HCL config for everything else (log, scheduler, agent template...)")
	fs.StringVar(&f.failHosts, "fail-hosts", "", "comma-separated hosts whose builds always fail (reschedulable)")
	fs.DurationVar(&f.buildTime, "build-time", 0, "how long each simulated build takes")
	fs.StringVar(&f.logLevel, "log-level", "", "override the log level (trace, debug, info, warn, error)")
	return c
}

func cmdDev(f *devFlags, stdout, stderr io.Writer) int {
	var (
		dataDir, etcdAddr, peerAddr, apiAddr = &f.dataDir, &f.etcdAddr, &f.peerAddr, &f.apiAddr
		placeAddr, identAddr, imageAddr      = &f.placeAddr, &f.identAddr, &f.imageAddr
		schedAddr, hosts, cells, cfgPath     = &f.schedAddr, &f.hosts, &f.cells, &f.cfgPath
		failHosts, buildTime, logLevel       = &f.failHosts, &f.buildTime, &f.logLevel
	)
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
	if cfg.Image == nil {
		cfg.Image = configs.DefaultImage()
	}
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind, cfg.Image.Bind = *apiAddr, *placeAddr, *schedAddr, *imageAddr
	login, err := devIdentity(cfg, *identAddr)
	if err != nil {
		fmt.Fprintln(stderr, "berth dev:", err)
		return 1
	}

	failing := map[string]bool{}
	for _, h := range strings.Split(*failHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			failing[h] = true
		}
	}
	return exitCode(stack.Run(configs.RoleDev, cfg, log, stdout, stack.Dev(stack.DevOptions{
		Hosts: *hosts, Cells: *cells, FailHosts: failing, BuildTime: *buildTime, DataDir: emb.DataDir, Login: login})))
}

// devIdentity serves identity on addr: the config's identity block, or
// without one the documented dev login (configs.DevIdentity) with a
// catalog of dev's compute API, Placement and image API. It returns the login to
// print, "" for the config's own users.
func devIdentity(cfg *configs.Config, addr string) (string, error) {
	if cfg.Identity != nil {
		cfg.Identity.Bind = addr
		return "", nil
	}
	hash, err := identity.HashPassword(configs.DevAdminPassword)
	if err != nil {
		return "", err
	}
	cfg.Identity = configs.DevIdentity(hash)
	cfg.Identity.Bind = addr
	cfg.Identity.Endpoints = []configs.CatalogEndpoint{
		{Type: "compute", Public: "http://" + cfg.API.Bind + "/v2.1"},
		{Type: "placement", Public: "http://" + cfg.Placement.Bind},
		{Type: "image", Public: "http://" + cfg.Image.Bind},
	}
	for i := range cfg.Identity.Endpoints {
		e := &cfg.Identity.Endpoints[i]
		e.Internal, e.Admin = e.Public, e.Public
	}
	return fmt.Sprintf("OS_AUTH_URL=http://%s/v3 OS_USERNAME=%s OS_PASSWORD=%s OS_PROJECT_NAME=%s OS_USER_DOMAIN_NAME=Default OS_PROJECT_DOMAIN_NAME=Default (dev default)",
		addr, configs.DevAdminUser, configs.DevAdminPassword, configs.DevAdminProject), nil
}
