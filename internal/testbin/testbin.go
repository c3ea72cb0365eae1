// Package testbin builds the berth binary for test packages that run it as
// a real process (e2e, deploy), once per package from its TestMain.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Main builds ../cmd/berth (relative to the test package's directory) into
// a temporary directory named with prefix, sets *bin to its path, runs the
// package's tests and exits with their code, removing the binary first. A
// failed build exits 1 before any test runs.
func Main(run func() int, prefix string, bin *string) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = filepath.Join(dir, "berth")
	build := exec.Command("go", "build", "-o", *bin, "../cmd/berth")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build berth:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := run()
	os.RemoveAll(dir)
	os.Exit(code)
}
