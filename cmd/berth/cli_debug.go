package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/dump"
)

// defaultDumpEndpoint is where `berth dev` and a default embedded member
// serve etcd clients.
const defaultDumpEndpoint = "127.0.0.1:2379"

// dumpFlags are `berth debug dump`'s flags.
type dumpFlags struct {
	endpoints, cfgPath, prefix, format, outPath string
	timeout                                     time.Duration
}

// newDebugCmd is `berth debug dump`.
func newDebugCmd(s *streams) *cobra.Command {
	c := groupCmd("debug", "read Berth's state from etcd directly, for bug reports (no API needed)")
	f := &dumpFlags{}
	dump := &cobra.Command{
		Use:   "dump [--etcd ENDPOINTS | --config FILE] [--prefix P] [--format table|json] [-o FILE]",
		Short: "the whole state at one etcd revision",
		Long: "The whole state at one etcd revision, for bug reports: a summary table (hosts,\n" +
			"instances per cell, in-flight work, leader, etcd members), or every key decoded\n" +
			"and grouped by kind (json); undecodable and unknown keys are shown, not fatal.",
		Args: exactArgs(),
		RunE: func(*cobra.Command, []string) error { return codeErr(cmdDebugDump(f, s.out, s.err)) },
	}
	fs := dump.Flags()
	fs.StringVar(&f.endpoints, "etcd", "", "etcd endpoints, comma-separated (default "+defaultDumpEndpoint+" without --config)")
	fs.StringVar(&f.cfgPath, "config", "", "a Berth config file whose etcd block (endpoints, prefix, tls, auth) to use")
	fs.StringVar(&f.prefix, "prefix", "", "Berth's etcd prefix (default: the config's, else "+etcdschema.DefaultPrefix+")")
	fs.StringVar(&f.format, "format", "table", "table (a summary) or json (every key, decoded, grouped by kind)")
	fs.StringVarP(&f.outPath, "out", "o", "", "write the dump to FILE instead of stdout")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up reading etcd after this long")
	c.AddCommand(dump)
	return c
}

// cmdDebugDump runs `berth debug dump`: the whole state under the prefix,
// read at one revision, for bug reports.
func cmdDebugDump(f *dumpFlags, stdout, stderr io.Writer) int {
	endpoints, cfgPath, prefix, format, outPath, timeout := &f.endpoints, &f.cfgPath, &f.prefix, &f.format, &f.outPath, &f.timeout
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "berth debug dump: "+format+"\n", a...)
		return 2
	}
	switch {
	case *format != "table" && *format != "json":
		return bad("--format %q: want table or json", *format)
	case *endpoints != "" && *cfgPath != "":
		return bad("--etcd and --config both name the cluster; give one")
	case *timeout <= 0:
		return bad("--timeout %s: must be positive", *timeout)
	}

	var cc clientv3.Config
	keyPrefix := etcdschema.DefaultPrefix
	if *cfgPath != "" {
		cfg, err := configs.Load(*cfgPath)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		if cc, err = cfg.Etcd.ClientConfig(); err != nil {
			return bad("%s: %v", *cfgPath, err)
		}
		keyPrefix = cfg.Etcd.Prefix
	} else {
		list := *endpoints
		if list == "" {
			list = defaultDumpEndpoint
		}
		for _, ep := range strings.Split(list, ",") {
			if ep = strings.TrimSpace(ep); ep != "" {
				cc.Endpoints = append(cc.Endpoints, ep)
			}
		}
		if len(cc.Endpoints) == 0 {
			return bad("--etcd %q names no endpoint", *endpoints)
		}
		cc.DialTimeout = 5 * time.Second
	}
	if *prefix != "" {
		keyPrefix = *prefix
	}
	// The client's own logs would interleave with the dump on a terminal;
	// its errors come back from the read.
	cc.Logger = zap.NewNop()
	cli, err := clientv3.New(cc)
	if err != nil {
		fmt.Fprintf(stderr, "berth debug dump: etcd client for %v: %v\n", cc.Endpoints, err)
		return 1
	}
	defer cli.Close()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	keys := etcdschema.New(keyPrefix)
	snap, err := dump.Take(ctx, cli, keys, dump.Options{})
	if err != nil {
		fmt.Fprintf(stderr, "berth debug dump: read etcd at %v: %v\n", cc.Endpoints, err)
		return 1
	}
	// Render in memory first: -o never holds half a dump.
	var buf bytes.Buffer
	if *format == "json" {
		err = dump.WriteJSON(&buf, snap)
	} else {
		err = dump.WriteTable(&buf, snap)
	}
	if err != nil {
		fmt.Fprintf(stderr, "berth debug dump: %v\n", err)
		return 1
	}
	if *outPath == "" {
		if _, err := stdout.Write(buf.Bytes()); err != nil {
			fmt.Fprintf(stderr, "berth debug dump: %v\n", err)
			return 1
		}
	} else {
		if err := os.WriteFile(*outPath, buf.Bytes(), 0o644); err != nil {
			fmt.Fprintf(stderr, "berth debug dump: %v\n", err)
			return 1
		}
	}
	n := len(snap.Entries) + len(snap.Unknown)
	fmt.Fprintf(stderr, "dumped %d keys under %s at revision %d", n, keys.All(), snap.Revision)
	if bad := len(snap.Undecodable()); bad > 0 || len(snap.Unknown) > 0 {
		fmt.Fprintf(stderr, " (%d undecodable, %d unknown: see the dump)", bad, len(snap.Unknown))
	}
	if *outPath != "" {
		fmt.Fprintf(stderr, " to %s", *outPath)
	}
	fmt.Fprintln(stderr)
	return 0
}
