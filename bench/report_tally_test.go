package bench

import (
	"strings"
	"testing"

	"github.com/berth-project/berth/internal/etcdtally"
)

// TestEtcdRequestRowsArePerServerByRole: -etcd-tally's counts print per
// measured server, a line per role, small counts not rounded to zero.
func TestEtcdRequestRowsArePerServerByRole(t *testing.T) {
	r := &Result{Measured: 10000, EtcdRequests: []etcdtally.Row{
		{Role: "agent fleet", Kind: etcdtally.Range, Count: 10000},
		{Role: "agent fleet", Kind: etcdtally.Txn, Count: 10000},
		{Role: "superconductor", Kind: etcdtally.WatchOpen, Count: 1},
	}}
	var b strings.Builder
	r.etcdRequestRows(&b)
	for _, want := range []string{"  agent fleet\trange 1, txn 1\n", "  superconductor\twatch 0.0001\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("rows:\n%s\nwant a line %q", b.String(), want)
		}
	}
	b.Reset()
	(&Result{Measured: 10}).etcdRequestRows(&b)
	if b.Len() != 0 {
		t.Errorf("without a tally: %q, want nothing", b.String())
	}
}
