package scheduler

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/placement"
)

// TestThreeSchedulersOverHTTPRaceForTheLastCapacity runs three schedulers
// as three processes would: each with its own placement index and host
// manager over one etcd, each behind its own HTTP endpoint. Clients race
// single and two-instance requests for 12 vCPUs on three hosts. No
// provider may go over capacity, every request is answered with
// Selections or NoValidHost, and every claim belongs to an answer.
func TestThreeSchedulersOverHTTPRaceForTheLastCapacity(t *testing.T) {
	c := newCloud(t)
	for _, h := range []string{"a", "b", "c"} {
		c.addHost(h, "cell1", 4, 65536, false)
	}
	var remotes []*Remote
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithCancel(c.ctx)
		t.Cleanup(cancel)
		p := placement.New(c.cli, c.keys, hclog.NewNullLogger())
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		hm := NewHostManager(c.cli, c.keys, hclog.NewNullLogger())
		go hm.Run(ctx)
		if err := hm.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
		s, err := New(DefaultConfig(), p, hm, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s.Handler())
		t.Cleanup(srv.Close)
		remotes = append(remotes, &Remote{URL: srv.URL})
	}

	type answer struct {
		uuids []string
		err   error
	}
	answers := make(chan answer, 24)
	var wg sync.WaitGroup
	for i := 0; i < 24; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			uuids := []string{fmt.Sprintf("r%d-0", i)}
			if i%3 == 0 {
				uuids = append(uuids, fmt.Sprintf("r%d-1", i))
			}
			sels, err := remotes[i%3].SelectDestinations(c.ctx, spec(1, 128, uuids...))
			if err == nil && len(sels) != len(uuids) {
				err = fmt.Errorf("%d selection lists for %d instances", len(sels), len(uuids))
			}
			answers <- answer{uuids, err}
		}(i)
	}
	wg.Wait()
	close(answers)
	placed := 0
	for a := range answers {
		var nvh *NoValidHostError
		switch {
		case a.err == nil:
			placed += len(a.uuids)
		case errors.As(a.err, &nvh):
			for _, u := range a.uuids { // all or nothing
				if _, err := c.place.GetAllocations(c.ctx, u); !errors.Is(err, placement.ErrNotFound) {
					t.Errorf("%s refused but holds allocations (err=%v)", u, err)
				}
			}
		default:
			t.Errorf("request %v: neither Selections nor NoValidHost: %v", a.uuids, a.err)
		}
	}
	var used int64
	for _, h := range []string{"a", "b", "c"} {
		u := c.usage(h)
		if u > 4 {
			t.Errorf("%s over capacity: %d of 4 vCPUs", h, u)
		}
		used += u
	}
	if used != int64(placed) {
		t.Fatalf("%d vCPUs claimed for %d placed instances: a claim without an answer", used, placed)
	}
	if placed == 0 {
		t.Fatal("nothing placed")
	}
	t.Logf("placed %d instances on 12 vCPUs", placed)
}
