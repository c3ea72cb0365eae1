// Command berth is Berth's one binary: `berth dev` runs everything in one
// process, `berth run server|conductor|agent|etcd --config F` run the
// roles as separate processes, `berth bench` is the load tool, and
// `berth <resource> <verb>` is the CLI, a client of the compute (Nova)
// API with the openstack CLI's credentials.
//
// The command line is built on cobra (as kubectl and etcdctl are): help
// generated from the commands themselves and exiting 0, shell completion,
// the same flag syntax everywhere. root.go builds the tree and maps
// errors to exit statuses (exit.go); each cmd_*.go is one noun.
package main

import (
	"io"
	"os"
)

func main() {
	trustOSCACert(os.Stderr)
	os.Exit(runIO(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is the command line args, its exit status (see exit.go); stdin is
// the process's own.
func run(args []string, stdout, stderr io.Writer) int {
	return runIO(args, os.Stdin, stdout, stderr)
}
