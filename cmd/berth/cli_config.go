package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/berth-project/berth/configs"
)

// newConfigCmd is `berth config validate|render`.
func newConfigCmd(s *streams) *cobra.Command {
	c := groupCmd("config", "check config files, render a machine's config from the deployment templates")
	var role string
	validate := &cobra.Command{
		Use:   "validate [--role ROLE] FILE...",
		Short: "check config files without starting anything",
		Long: "Check config files without starting anything: every mistake with file:line:col;\n" +
			"with --role, also that the files hold what ROLE needs to start.",
		Args: minArgs("FILE"),
		RunE: func(_ *cobra.Command, files []string) error {
			switch role {
			case "", configs.RoleServer, configs.RoleConductor, configs.RoleAgent, configs.RoleEtcd, configs.RoleDev:
			default:
				return usageErrorf("--role %q is not server, conductor, agent, etcd or dev", role)
			}
			if !configsValidate(files, role, s.out) {
				return &exitError{code: exitFailure}
			}
			return nil
		},
	}
	validate.Flags().StringVar(&role, "role", "", "also check what this role needs to start (server, conductor, agent, etcd, dev)")
	c.AddCommand(validate, newConfigRenderCmd(s))
	return c
}

func configsValidate(paths []string, role string, w io.Writer) bool {
	return configs.ValidateFiles(paths, role, w)
}

// varFlags collects repeated -var KEY=VALUE flags.
type varFlags map[string]string

func (v varFlags) Type() string { return "KEY=VALUE" }

func (v varFlags) String() string {
	if len(v) == 0 {
		return ""
	}
	return fmt.Sprint(map[string]string(v))
}

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

// renderFlags are `berth config render`'s flags.
type renderFlags struct {
	name, address, etcd, cell, dataDir, out, adminHash string
	tlsDir                                             string
	noTLS                                              bool
	vars                                               varFlags
}

func newConfigRenderCmd(s *streams) *cobra.Command {
	f := &renderFlags{vars: varFlags{}}
	c := &cobra.Command{
		Use:   "render ROLE --name NAME --address IP --etcd NAME=IP,... [flags]",
		Short: "one machine's config for ROLE from the deployment templates; what deploy/ runs on each VM",
		Long: "Render one machine's config for ROLE (" + strings.Join(configs.DeployRoles, ", ") + ") from the\n" +
			"deployment templates (configs/templates), checked before it is written.",
		Args:      exactArgs("ROLE"),
		ValidArgs: configs.DeployRoles,
		RunE:      func(_ *cobra.Command, args []string) error { return codeErr(cmdConfigRender(args[0], f, s.out, s.err)) },
	}
	fs := c.Flags()
	fs.StringVar(&f.name, "name", "", "this machine's name: etcd member and compute host name (required)")
	fs.StringVar(&f.address, "address", "", "this machine's address, bound and advertised by its roles (required)")
	fs.StringVar(&f.etcd, "etcd", "", "the etcd cluster's members as NAME=ADDRESS,... (required)")
	fs.StringVar(&f.cell, "cell", "", "the cell of this machine's agent or conductor")
	fs.StringVar(&f.dataDir, "data-dir", "/var/lib/berth", "where etcd data and process-driver state live")
	fs.StringVarP(&f.out, "out", "o", "", "write to this file (mode 0640) instead of stdout")
	fs.StringVar(&f.tlsDir, "tls-dir", configs.DefaultTLSDir, "this machine's certificates: ca.pem, NAME.pem, NAME-key.pem (berth tls ca|cert)")
	fs.BoolVar(&f.noTLS, "no-tls", false, "render plain HTTP everywhere (a lab without certificates)")
	fs.StringVar(&f.adminHash, "admin-password-hash", "", "bcrypt hash of the identity admin's password, from `berth identity hash-password` (required for the server role)")
	fs.Var(f.vars, "var", "KEY=VALUE tunable, repeatable:\n    "+strings.Join(configs.DeployTunables(), "\n    "))
	return c
}

// cmdConfigRender renders one machine's config for a role from the
// deployment templates (configs/templates), checked before it is written.
func cmdConfigRender(role string, f *renderFlags, stdout, stderr io.Writer) int {
	name, address, etcd, cell, dataDir, out, adminHash, vars := &f.name, &f.address, &f.etcd, &f.cell, &f.dataDir, &f.out, &f.adminHash, f.vars
	tlsDir, noTLS := &f.tlsDir, &f.noTLS
	for flagName, v := range map[string]string{"--name": *name, "--address": *address, "--etcd": *etcd} {
		if v == "" {
			fmt.Fprintf(stderr, "berth config render: %s is required\n", flagName)
			return 2
		}
	}
	members, err := configs.ParseEtcdMembers(*etcd)
	if err != nil {
		fmt.Fprintf(stderr, "berth config render: --etcd: %v\n", err)
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
