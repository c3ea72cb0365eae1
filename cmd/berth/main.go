// Command berth is Berth's one binary: `berth dev` runs everything in one
// process, `berth server|conductor|agent -config F` run the roles as
// separate processes, and `berth <noun> <verb>` is the CLI.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/stack"
)

const usage = `berth: a cloud scheduling control plane (Nova scheduler, Placement and cells v2 on etcd)

Run:
  berth dev [flags]               everything in one process, embedded etcd, simulated hosts
  berth server -config FILE       api, placement, scheduler, superconductor roles (as the file enables)
  berth conductor -config FILE    a cell conductor
  berth agent -config FILE        a compute host agent
  berth etcd -config FILE         one member of Berth's etcd cluster (embedded etcd, no other install)
  berth bench [SCENARIO] [flags]  load tool: populate, boot, churn, failover, coldstart
                                  against simulated hosts (-h for flags)

CLI (finds the API with --api or BERTH_API, default http://127.0.0.1:8774):
  berth server create --flavor NAME [--count N] [--name NAME] [--az ZONE] [--host HOST]
                      [--hint group=ID|same_host=ID|different_host=ID]... [--wait]
  berth server list
  berth server show ID
  berth server delete ID [--wait]
  berth service list                          compute services: up/down, enabled/disabled
  berth service disable HOST [--reason TEXT]  keep new builds off HOST (sets COMPUTE_STATUS_DISABLED)
  berth service enable HOST
  berth service force-down HOST [--unset]     mark HOST down whatever its heartbeat says
  berth host list                             hosts with usage/capacity from Placement
  berth cell list | create NAME | discover-hosts
  berth selection show INSTANCE               alternates left and attempts made

Config:
  berth config validate [-role ROLE] FILE...
                                  check config files without starting anything (-role: and
                                  that they hold what ROLE needs)
  berth config render ROLE -name NAME -address IP -etcd NAME=IP,... [-cell CELL] [-data-dir DIR]
                      [-var KEY=VALUE]... [-o FILE]
                                  one machine's config for ROLE (etcd, server, conductor, agent)
                                  from the deployment templates; what deploy/ runs on each VM

Debugging (reads etcd directly, no API needed):
  berth debug dump [-etcd ENDPOINTS | -config FILE] [-prefix P] [-format table|json] [-o FILE]
                                  the whole state at one etcd revision, for bug reports: a summary
                                  table (hosts, instances per cell, in-flight work, leader, etcd
                                  members), or every key decoded and grouped by kind (json);
                                  undecodable and unknown keys are shown, not fatal

Server groups and host aggregates (same --api):
  berth server-group create NAME --policy POLICY [--max-per-host N]
  berth server-group list [--all-projects] | show ID | delete ID...
  berth aggregate create NAME [--az ZONE]
  berth aggregate list | show ID | delete ID...
  berth aggregate add-host|remove-host ID HOST
  berth aggregate set ID KEY=VALUE... | unset ID KEY...
  berth aggregate sync            mirror every aggregate's hosts to placement again

Run 'berth COMMAND -h' for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "dev":
		return cmdDev(rest, stdout, stderr)
	case "server":
		if len(rest) > 0 && isServerVerb(rest[0]) {
			return cmdServerCLI(rest, stdout, stderr)
		}
		return cmdRole(configs.RoleServer, stack.Server, rest, stdout, stderr)
	case "service", "host", "cell", "selection":
		return cmdOps(cmd, rest, stdout, stderr)
	case "conductor":
		return cmdRole(configs.RoleConductor, stack.Conductor, rest, stdout, stderr)
	case "agent":
		return cmdRole(configs.RoleAgent, stack.Agent, rest, stdout, stderr)
	case "etcd":
		return cmdRole(configs.RoleEtcd, stack.EtcdMember, rest, stdout, stderr)
	case "bench":
		return cmdBench(rest, stdout, stderr)
	case "config":
		return cmdConfig(rest, stdout, stderr)
	case "debug":
		return cmdDebug(rest, stdout, stderr)
	case "server-group":
		return cmdServerGroupCLI(rest, stdout, stderr)
	case "aggregate":
		return cmdAggregateCLI(rest, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "berth: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

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
