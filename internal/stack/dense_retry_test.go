package stack

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/internal/testwait"
)

// TestDenseRequestKeepsItsRetries is issue 17's "dense multi-creates keep
// their retries", tried as a new user would: 12 servers in one request on
// 6 hosts, 2 of which fail every build. The request spans every host, so
// Nova's alternates (hosts no sibling took) are empty and the 4 servers
// placed on the failing hosts would end in ERROR after one attempt; with
// the siblings' hosts as further alternates the cell conductor retries
// them there and all 12 end ACTIVE, none on a failing host.
func TestDenseRequestKeepsItsRetries(t *testing.T) {
	failing := map[string]bool{"compute-2": true, "compute-5": true}
	r := newMoveRig(t, 6, failing)
	resp, err := r.c.CreateServers(r.ctx, api.CreateRequest{Name: "dense", Flavor: "m1.tiny", Count: 12})
	if err != nil {
		t.Fatal(err)
	}
	ids := serverIDs(resp)
	if len(ids) != 12 {
		t.Fatalf("created %d servers, want 12", len(ids))
	}
	retried, onHosts := 0, map[string]int{}
	for _, id := range ids {
		var s *api.ServerView
		testwait.Poll(t, time.Minute, "server "+id+" ACTIVE", func() (bool, string) {
			s, err = r.c.GetServer(r.ctx, id)
			if err != nil {
				return false, err.Error()
			}
			if s.Status == "ERROR" {
				t.Fatalf("server %s ERROR after %d attempts: %+v", id, s.Attempts, s.Fault)
			}
			return s.Status == "ACTIVE", fmt.Sprintf("%s on %q after %d attempts", s.Status, s.Host, s.Attempts)
		})
		if failing[s.Host] {
			t.Errorf("server %s ACTIVE on failing host %s", id, s.Host)
		}
		if s.Attempts > 1 {
			retried++
		}
		onHosts[s.Host]++
	}
	// The weighers spread the first attempt over the six empty hosts, so
	// the failing ones got some: without retries the test proves nothing.
	if retried == 0 {
		t.Fatalf("no server was retried (hosts %v): the failing hosts were never tried", onHosts)
	}
	t.Logf("%d of 12 servers retried; ACTIVE on %v", retried, onHosts)
}
