package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	cfgPath, failHosts, logLevel, logFormat                                          string
	buildTime                                                                        time.Duration
	// changed says a flag was given on the command line.
	changed func(name string) bool
}

func newDevCmd(s *streams) *cobra.Command {
	c, _ := devCommand(s)
	return c
}

// devCommand is `berth dev` and the flags it binds.
func devCommand(s *streams) (*cobra.Command, *devFlags) {
	f := &devFlags{}
	var c *cobra.Command
	f.changed = func(name string) bool { return c.Flags().Changed(name) }
	c = &cobra.Command{
		Use:   "dev",
		Short: "everything in one process: embedded etcd, every role, simulated hosts",
		Long: "Run every role in one process over an embedded etcd, with simulated compute\n" +
			"hosts spread over cells: a whole Berth to try, with noauth and a dev login.\n\n" +
			"With --config FILE, what the file sets wins over these flags' defaults (its\n" +
			"binds, etcd URLs and data_dir); a flag given on the command line wins over\n" +
			"the file. An address in use is reported with the flag that moves it.",
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
	fs.StringVar(&f.logFormat, "log-format", "", "override the log format: text, or json (one object a line, for a log shipper)")
	return c, f
}

func cmdDev(f *devFlags, stdout, stderr io.Writer) int {
	var (
		dataDir, hosts, cells, cfgPath = &f.dataDir, &f.hosts, &f.cells, &f.cfgPath
		failHosts, buildTime, logLevel = &f.failHosts, &f.buildTime, &f.logLevel
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
	if err := devLogSettings(cfg, *logLevel, f.logFormat); err != nil {
		fmt.Fprintln(stderr, "berth dev:", err)
		return 2
	}
	log := logging.New(cfg.Log, stderr).Named("dev")
	defer applyGC(cfg, log)()

	// The file wins over the flags' defaults; a flag given wins over the
	// file (devSettings).
	if cfg.Etcd.Embedded == nil {
		cfg.Etcd.Embedded = configs.Defaults().Etcd.Embedded
		cfg.Etcd.Endpoints = nil
	}
	if cfg.Image == nil {
		cfg.Image = configs.DefaultImage()
	}
	addrs, identBind, dataDirFromFile := devSettings(cfg, f)
	if err := checkAddrsFree(addrs); err != nil {
		fmt.Fprintln(stderr, "berth dev:", err)
		return 1
	}
	emb := cfg.Etcd.Embedded
	if !dataDirFromFile {
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
	}
	login, err := devIdentity(cfg, identBind)
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

// devAddr is one address `berth dev` binds and what set it: a flag, or
// the config file.
type devAddr struct {
	what, flag, addr, from string
}

// devSettings puts the binds, etcd URLs and data dir into cfg: a flag
// given on the command line wins; else the file's value, where the file
// set one (one that differs from configs.Defaults(): the file's decoder
// fills a block's unset fields with those, so a value equal to the
// default cannot be told from an unset one, and the flag's default
// applies); else the flag's default. It returns the addresses to check
// the identity API's bind, and whether the data dir is the file's.
func devSettings(cfg *configs.Config, f *devFlags) ([]devAddr, string, bool) {
	def := configs.Defaults()
	fromFile := f.cfgPath != ""
	var addrs []devAddr
	pick := func(what, flag, flagVal, fileVal, fileDefault string) string {
		if f.changed(flag) || !fromFile || fileVal == "" || fileVal == fileDefault {
			addrs = append(addrs, devAddr{what: what, flag: flag, addr: flagVal, from: "--" + flag})
			return flagVal
		}
		addrs = append(addrs, devAddr{what: what, flag: flag, addr: fileVal, from: f.cfgPath})
		return fileVal
	}
	emb := cfg.Etcd.Embedded
	emb.ClientURL = "http://" + pick("etcd", "etcd", f.etcdAddr, strings.TrimPrefix(emb.ClientURL, "http://"),
		strings.TrimPrefix(def.Etcd.Embedded.ClientURL, "http://"))
	emb.PeerURL = "http://" + pick("etcd peer", "etcd-peer", f.peerAddr, strings.TrimPrefix(emb.PeerURL, "http://"),
		strings.TrimPrefix(def.Etcd.Embedded.PeerURL, "http://"))
	cfg.API.Bind = pick("compute API", "api", f.apiAddr, cfg.API.Bind, def.API.Bind)
	cfg.Placement.Bind = pick("Placement API", "placement", f.placeAddr, cfg.Placement.Bind, def.Placement.Bind)
	cfg.Scheduler.Bind = pick("scheduler", "scheduler", f.schedAddr, cfg.Scheduler.Bind, def.Scheduler.Bind)
	cfg.Image.Bind = pick("image API", "image", f.imageAddr, cfg.Image.Bind, configs.DefaultImage().Bind)
	identBind := ""
	if cfg.Identity != nil {
		identBind = cfg.Identity.Bind
	}
	identBind = pick("identity API", "identity", f.identAddr, identBind, configs.DefaultIdentity().Bind)
	dataDirFromFile := !f.changed("data-dir") && fromFile && emb.DataDir != "" && emb.DataDir != def.Etcd.Embedded.DataDir
	return addrs, identBind, dataDirFromFile
}

// checkAddrsFree tries to listen on each address, so that one in use is
// reported as such, with what moves it, rather than as whatever fails
// first when a role cannot bind (an embedded etcd without its client
// port reads as "cannot reach etcd").
func checkAddrsFree(addrs []devAddr) error {
	for _, a := range addrs {
		host, port, err := net.SplitHostPort(a.addr)
		if err != nil {
			return fmt.Errorf("%s address %q (%s): %v", a.what, a.addr, a.from, err)
		}
		if port == "0" {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				how := "move it with --" + a.flag + " ADDR"
				if a.from != "--"+a.flag {
					how = "set in " + a.from + "; change it there or give --" + a.flag + " ADDR"
				}
				return fmt.Errorf("the %s address %s is in use (another berth dev?): %s", a.what, a.addr, how)
			}
			return fmt.Errorf("the %s address %s (%s): %v", a.what, a.addr, a.from, err)
		}
		_ = l.Close()
	}
	return nil
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

// devLogSettings applies --log-level and --log-format over the config's
// log block (a flag given wins over the file).
func devLogSettings(cfg *configs.Config, level, format string) error {
	if level != "" {
		cfg.Log.Level = level
	}
	switch format {
	case "":
	case configs.LogFormatText, configs.LogFormatJSON:
		cfg.Log.Format = format
	default:
		return fmt.Errorf("--log-format %q: want text or json", format)
	}
	return nil
}
