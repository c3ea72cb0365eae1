package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdauth"
)

const etcdAuthUsage = `usage: berth etcd-auth -config FILE [-root-password-file FILE]
           [-server MACHINE]... [-conductor MACHINE=CELL]... [-agent HOST=CELL]... [-member MACHINE]...

Makes one etcd user per machine, named as its certificate (berth tls cert
-name), with the roles of what runs on it (package etcdauth says what
each may write), and turns etcd's authentication on. Run it again after
adding a host or a cell, with every machine listed: a machine's roles
become what the flags say. FILE's etcd block reaches the cluster (its
endpoints and tls): once auth is on, with a certificate named root or
the root password. Berth's processes then authenticate with their
machine's certificate; no password is needed.
`

// repeated collects a repeatable flag.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// cmdEtcdAuth is `berth etcd-auth`: package etcdauth's plan, applied.
func cmdEtcdAuth(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("berth etcd-auth", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, etcdAuthUsage) }
	path := fs.String("config", "", "a config whose etcd block reaches the cluster (required)")
	rootPW := fs.String("root-password-file", "", "the root user's password (default: none, a certificate named root)")
	var servers, conductors, agents, members repeated
	fs.Var(&servers, "server", "a machine running berth server")
	fs.Var(&conductors, "conductor", "MACHINE=CELL: a machine running cell CELL's conductor")
	fs.Var(&agents, "agent", "HOST=CELL: a compute host and its cell")
	fs.Var(&members, "member", "a machine running only an etcd member")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *path == "" || fs.NArg() > 0 || len(servers)+len(conductors)+len(agents)+len(members) == 0 {
		fmt.Fprint(stderr, etcdAuthUsage)
		return 2
	}
	m := etcdauth.Machines{Servers: servers, Members: members, Conductors: map[string]string{}}
	for _, c := range conductors {
		machine, cell, ok := strings.Cut(c, "=")
		if !ok || machine == "" || cell == "" {
			fmt.Fprintf(stderr, "berth etcd-auth: -conductor %q: want MACHINE=CELL\n", c)
			return 2
		}
		m.Conductors[machine] = cell
	}
	for _, a := range agents {
		host, cell, ok := strings.Cut(a, "=")
		if !ok || host == "" || cell == "" {
			fmt.Fprintf(stderr, "berth etcd-auth: -agent %q: want HOST=CELL\n", a)
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
