package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdauth"
)

const etcdAuthLong = `Makes one etcd user per machine, named as its certificate (berth tls cert
--name), with the roles of what runs on it (package etcdauth says what
each may write), and turns etcd's authentication on. Run it again after
adding a host or a cell, with every machine listed: a machine's roles
become what the flags say. FILE's etcd block reaches the cluster (its
endpoints and tls): once auth is on, with a certificate named root or
the root password. Berth's processes then authenticate with their
machine's certificate; no password is needed.`

// etcdAuthFlags are `berth etcd-auth`'s flags.
type etcdAuthFlags struct {
	config, rootPasswordFile             string
	servers, conductors, agents, members []string
}

// newEtcdAuthCmd is `berth etcd-auth`: package etcdauth's plan, applied.
func newEtcdAuthCmd(s *streams) *cobra.Command {
	f := &etcdAuthFlags{}
	c := &cobra.Command{
		Use:   "etcd-auth --config FILE [--server M]... [--conductor M=CELL]... [--agent HOST=CELL]... [--member M]...",
		Short: "an etcd user per machine with only its roles' keys, and etcd's authentication on",
		Long:  etcdAuthLong,
		Args:  exactArgs(),
		RunE:  func(*cobra.Command, []string) error { return codeErr(cmdEtcdAuth(f, s.out, s.err)) },
	}
	fs := c.Flags()
	fs.StringVar(&f.config, "config", "", "a config whose etcd block reaches the cluster (required)")
	fs.StringVar(&f.rootPasswordFile, "root-password-file", "", "the root user's password (default: none, a certificate named root)")
	fs.StringArrayVar(&f.servers, "server", nil, "a machine running berth run server (repeatable)")
	fs.StringArrayVar(&f.conductors, "conductor", nil, "MACHINE=CELL: a machine running cell CELL's conductor (repeatable)")
	fs.StringArrayVar(&f.agents, "agent", nil, "HOST=CELL: a compute host and its cell (repeatable)")
	fs.StringArrayVar(&f.members, "member", nil, "a machine running only an etcd member (repeatable)")
	return c
}

// cmdEtcdAuth applies package etcdauth's plan for the machines f names.
func cmdEtcdAuth(f *etcdAuthFlags, stdout, stderr io.Writer) int {
	servers, conductors, agents, members, path, rootPW := f.servers, f.conductors, f.agents, f.members, &f.config, &f.rootPasswordFile
	if *path == "" {
		fmt.Fprintln(stderr, "berth etcd-auth: --config is required")
		return 2
	}
	if len(servers)+len(conductors)+len(agents)+len(members) == 0 {
		fmt.Fprintln(stderr, "berth etcd-auth: name the machines: --server, --conductor, --agent or --member")
		return 2
	}
	m := etcdauth.Machines{Servers: servers, Members: members, Conductors: map[string]string{}}
	for _, c := range conductors {
		machine, cell, ok := strings.Cut(c, "=")
		if !ok || machine == "" || cell == "" {
			fmt.Fprintf(stderr, "berth etcd-auth: --conductor %q: want MACHINE=CELL\n", c)
			return 2
		}
		m.Conductors[machine] = cell
	}
	for _, a := range agents {
		host, cell, ok := strings.Cut(a, "=")
		if !ok || host == "" || cell == "" {
			fmt.Fprintf(stderr, "berth etcd-auth: --agent %q: want HOST=CELL\n", a)
			return 2
		}
		m.Agents = append(m.Agents, etcdauth.Host{Name: host, Cell: cell, ProviderUUID: agent.ProviderUUIDForHost(host)})
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "berth etcd-auth:", err)
		return 1
	}
	pw := ""
	if *rootPW != "" {
		b, err := os.ReadFile(*rootPW)
		if err != nil {
			return fail(err)
		}
		pw = strings.TrimRight(string(b), "\r\n")
	}
	cfg, err := configs.Load(*path)
	if err != nil {
		return fail(err)
	}
	cc, err := cfg.Etcd.ClientConfig()
	if err != nil {
		return fail(err)
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return fail(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	roles, users := etcdauth.Plan(etcdschema.New(cfg.Etcd.Prefix), m)
	if err := etcdauth.Apply(ctx, cli, roles, users, pw); err != nil {
		return fail(err)
	}
	for _, u := range users {
		fmt.Fprintf(stdout, "%s: %s\n", u.Name, strings.Join(u.Roles, ", "))
	}
	fmt.Fprintln(stdout, "etcd auth enabled")
	return 0
}
