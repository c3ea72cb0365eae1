package bench

import (
	"context"
	"flag"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/placement/httpapi"
)

// TestPlacementBenchAgainstBerth runs `berth bench placement` against an
// in-process Berth Placement API (real etcd, real HTTP) with small
// figures. It fails on an error, a wrong answer count, a lost claim or
// an over-committed provider, never on a timing; and everything the run
// made is gone afterwards.
func TestPlacementBenchAgainstBerth(t *testing.T) {
	cli := etcdtest.Client(t)
	svc := placement.New(cli, etcdschema.New("/pbench"), hclog.NewNullLogger())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(svc, nil, httpapi.Options{}))
	t.Cleanup(srv.Close)

	c := DefaultPlacementConfig()
	fs := flag.NewFlagSet("berth bench placement", flag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse([]string{"-url", srv.URL, "-providers", "40", "-limits", "5,100",
		"-candidate-requests", "10", "-claim-clients", "3", "-claim-time", "300ms",
		"-race-clients", "6", "-race-vcpu", "8"}); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	res, err := RunPlacement(ctx, c, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(res.Candidates) != 2 || res.Candidates[0].Answers != 5 || res.Candidates[1].Answers != 40 {
		t.Errorf("candidates %+v, want 5 then 40 answers", res.Candidates)
	}
	if res.ClaimCycles == 0 {
		t.Error("no claim cycle completed")
	}
	r := res.Race
	if r.Claimed != 8 || r.Used != 8 || r.Claimed+r.Conflicts+r.Refused != r.Attempts {
		t.Errorf("race %+v: want the 8 VCPU claimed, used, and every attempt counted", r)
	}
	res.WriteTable(io.Discard)

	// The run removed its providers and allocations.
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := svc.SyncIndex(sctx); err != nil {
		t.Fatal(err)
	}
	pc := &placementClient{cfg: c, http: srv.Client()}
	var list struct {
		Providers []any `json:"resource_providers"`
	}
	if _, _, err := pc.do(sctx, "GET", "/resource_providers", nil, &list, 200); err != nil {
		t.Fatal(err)
	}
	if len(list.Providers) != 0 {
		t.Errorf("%d providers left after the run", len(list.Providers))
	}
}

// TestPlacementConfigValidate names what is wrong with the flags.
func TestPlacementConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		desc string
		edit func(*PlacementConfig)
		want string
	}{
		{"no url", func(c *PlacementConfig) {}, "-url is required"},
		{"no providers", func(c *PlacementConfig) { c.URL, c.Providers = "http://x", 0 }, "at least 1"},
		{"old microversion", func(c *PlacementConfig) { c.URL, c.Microversion = "http://x", "1.20" }, "1.28 or later"},
		{"fine", func(c *PlacementConfig) { c.URL = "http://x" }, ""},
	} {
		c := DefaultPlacementConfig()
		tc.edit(&c)
		err := c.Validate()
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.desc, err, tc.want)
		}
	}
}
