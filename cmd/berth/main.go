// Command berth is Berth's one binary: `berth dev` runs everything in one
// process, `berth server|conductor|agent|etcd -config F` run the roles as
// separate processes, `berth bench` is the load tool, and
// `berth <noun> <verb>` is the CLI.
//
// This package is the command line only: run dispatches on the first
// word, and each cli_*.go parses its command's flags and prints. The
// roles are started by internal/stack, the load tool is package bench.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/stack"
)

func main() {
	trustOSCACert(os.Stderr)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command line args, its exit status: 0, 1 on failure, 2 on a
// usage error.
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
	case "tls":
		return cmdTLS(rest, stdout, stderr)
	case "etcd-auth":
		return cmdEtcdAuth(rest, stdout, stderr)
	case "identity":
		return cmdIdentity(rest, os.Stdin, stdout, stderr)
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
