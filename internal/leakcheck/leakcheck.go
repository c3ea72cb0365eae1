// Package leakcheck fails a test binary that leaves goroutines running
// after its tests, as etcd's client/v3/concurrency tests do. A test
// package that starts goroutines (directly, or through an agent, an
// informer, placement or an embedded etcd) calls it from its TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
//
// Everything a test starts must be stopped by that test: a goroutine left
// behind is a missing Close or cancel, in the test or in the code under
// it. No goroutine is let through by name: an embedded etcd member, its
// gRPC server and Berth's clients stop everything they start when closed.
package leakcheck

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/berth-project/berth/internal/testwait"
)

// grace is how long goroutines may take to wind down after the last test.
// goleak's own retries give up after about two seconds; an embedded etcd
// member's peer connections outlive a cluster by up to its peer read
// timeout (rafthttp.ConnReadTimeout, 5s): a member never closes the
// keep-alive connections of its peer round tripper, and the serving end
// only notices when its read deadline passes.
const grace = 15 * time.Second

// Main runs the package's tests and exits with their code, or with 1 when
// they passed but goroutines were still running grace after the last one.
func Main(m *testing.M) {
	code := m.Run()
	if code == 0 {
		var leaked error
		_ = testwait.Wait(context.Background(), grace, func() (bool, string) {
			leaked = goleak.Find()
			return leaked == nil, ""
		})
		if leaked != nil {
			fmt.Fprintf(os.Stderr, "leakcheck: goroutines still running %v after the tests passed: %v\n", grace, leaked)
			code = 1
		}
	}
	os.Exit(code)
}
