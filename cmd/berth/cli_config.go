package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/berth-project/berth/configs"
)

// cmdConfig is `berth config validate|render`.
func cmdConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) >= 1 && args[0] == "render" {
		return cmdConfigRender(args[1:], stdout, stderr)
	}
	const use = "usage: berth config validate [-role ROLE] FILE...\n       berth config render ROLE -name NAME -address IP -etcd NAME=IP,... [flags]"
	if len(args) < 1 || args[0] != "validate" {
		fmt.Fprintln(stderr, use)
		return 2
	}
	fs := flag.NewFlagSet("berth config validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", "", "also check what this role needs to start (server, conductor, agent, etcd, dev)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, use)
		return 2
	}
	switch *role {
	case "", configs.RoleServer, configs.RoleConductor, configs.RoleAgent, configs.RoleEtcd, configs.RoleDev:
	default:
		fmt.Fprintf(stderr, "berth config validate: -role %q is not server, conductor, agent, etcd or dev\n", *role)
		return 2
	}
	if !configsValidate(fs.Args(), *role, stdout) {
		return 1
	}
	return 0
}

func configsValidate(paths []string, role string, w io.Writer) bool {
	return configs.ValidateFiles(paths, role, w)
}

// varFlags collects repeated -var KEY=VALUE flags.
type varFlags map[string]string

func (v varFlags) String() string { return fmt.Sprint(map[string]string(v)) }

func (v varFlags) Set(s string) error {
	k, val, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	if _, dup := v[k]; dup {
		return fmt.Errorf("%s is set twice", k)
	}
	v[k] = val
	return nil
}

// cmdConfigRender renders one machine's config for a role from the
// deployment templates (configs/templates), checked before it is written.
func cmdConfigRender(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "usage: berth config render ROLE [flags]; ROLE is one of %s\n", strings.Join(configs.DeployRoles, ", "))
		return 2
	}
	role := args[0]
	fs := flag.NewFlagSet("berth config render "+role, flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "this machine's name: etcd member and compute host name (required)")
	address := fs.String("address", "", "this machine's address, bound and advertised by its roles (required)")
	etcd := fs.String("etcd", "", "the etcd cluster's members as NAME=ADDRESS,... (required)")
	cell := fs.String("cell", "", "the cell of this machine's agent or conductor")
	dataDir := fs.String("data-dir", "/var/lib/berth", "where etcd data and process-driver state live")
	out := fs.String("o", "", "write to this file (mode 0640) instead of stdout")
	tlsDir := fs.String("tls-dir", configs.DefaultTLSDir, "this machine's certificates: ca.pem, NAME.pem, NAME-key.pem (berth tls ca|cert)")
	noTLS := fs.Bool("no-tls", false, "render plain HTTP everywhere (a lab without certificates)")
	adminHash := fs.String("admin-password-hash", "", "bcrypt hash of the identity admin's password, from `berth identity hash-password` (required for the server role)")
	vars := varFlags{}
	fs.Var(vars, "var", "KEY=VALUE tunable, repeatable:\n    "+strings.Join(configs.DeployTunables(), "\n    "))
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "berth config render: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	for flagName, v := range map[string]string{"-name": *name, "-address": *address, "-etcd": *etcd} {
		if v == "" {
			fmt.Fprintf(stderr, "berth config render: %s is required\n", flagName)
			return 2
		}
	}
	members, err := configs.ParseEtcdMembers(*etcd)
	if err != nil {
		fmt.Fprintf(stderr, "berth config render: -etcd: %v\n", err)
		return 2
	}
	b, err := configs.RenderDeploy(role, configs.DeployVars{
		Name: *name, Address: *address, Etcd: members, Cell: *cell, DataDir: *dataDir, Vars: vars,
		AdminPasswordHash: *adminHash, TLSDir: *tlsDir, NoTLS: *noTLS,
	})
	if err != nil {
		fmt.Fprintf(stderr, "berth config render: %v\n", err)
		return 1
	}
	if *out == "" {
		_, _ = stdout.Write(b)
		return 0
	}
	// Written beside the target and renamed, so a unit starting at the
	// same moment never reads half a file.
	tmp, err := os.CreateTemp(filepath.Dir(*out), "."+filepath.Base(*out)+".*")
	if err == nil {
		_, err = tmp.Write(b)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(tmp.Name(), 0o640)
		}
		if err == nil {
			err = os.Rename(tmp.Name(), *out)
		}
		if err != nil {
			os.Remove(tmp.Name())
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "berth config render: write %s: %v\n", *out, err)
		return 1
	}
	return 0
}
