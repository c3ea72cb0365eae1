package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/internal/members"
	"github.com/berth-project/berth/internal/testwait"
)

func TestSelectDestinationsOverHTTP(t *testing.T) {
	c := newCloud(t)
	c.addHost("a", "cell1", 4, 4096, false)
	c.addHost("b", "cell1", 4, 4096, false)
	s := c.scheduler(DefaultConfig())
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	r := &Remote{URL: srv.URL}

	sels, err := r.SelectDestinations(c.ctx, spec(2, 1024, "web-1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(sels) != 1 || len(sels[0]) != 2 {
		t.Fatalf("want one instance with a chosen host and one alternate, got %+v", sels)
	}
	got := sels[0][0]
	if got.ComputeNodeUUID != "rp-"+got.ServiceHost || got.Nodename != got.ServiceHost || got.Cell != "cell1" ||
		got.AllocationRequest == "" || got.AllocationRequestVersion != AllocationRequestVersion {
		t.Fatalf("selection fields not filled: %+v", got)
	}
	if c.usage(got.ServiceHost) != 2 {
		t.Fatalf("%s not claimed over HTTP", got.ServiceHost)
	}

	// NoValidHost comes back typed, with what each filter removed.
	if _, err := c.cli.Delete(c.ctx, c.keys.Alive("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Delete(c.ctx, c.keys.Alive("b")); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "hosts seen down", func() bool {
		va, _ := c.hosts.view("a")
		vb, _ := c.hosts.view("b")
		return !va.Up && !vb.Up
	})
	_, err = r.SelectDestinations(c.ctx, spec(1, 512, "web-2"))
	var nvh *NoValidHostError
	if !errors.As(err, &nvh) {
		t.Fatalf("want NoValidHostError over HTTP, got %v", err)
	}
	if len(nvh.Removed) != 1 || nvh.Removed[0].Filter != "ComputeFilter" || nvh.Removed[0].Removed != 2 {
		t.Fatalf("filter counts lost over HTTP: %+v", nvh.Removed)
	}
	reasons := slices.Sorted(slices.Values(nvh.Removed[0].Reasons))
	if want := []string{"a: compute service is down", "b: compute service is down"}; !slices.Equal(reasons, want) {
		t.Fatalf("filter reasons over HTTP %q, want %q", reasons, want)
	}
	// A request pinned to a host hears why that host was turned down.
	pinned := spec(1, 512, "web-3")
	pinned.RequestedDestination = &Destination{Host: "a"}
	_, err = r.SelectDestinations(c.ctx, pinned)
	want := &HostRejection{Host: "a", By: "ComputeFilter", Reason: "compute service is down"}
	if !errors.As(err, &nvh) || nvh.RequestedHost == nil || *nvh.RequestedHost != *want {
		t.Fatalf("pinned request: want NoValidHost with the requested host's reason %+v, got %v", want, err)
	}
	if !strings.HasPrefix(err.Error(), "No valid host was found. ") ||
		!strings.HasSuffix(err.Error(), " Requested host a: ComputeFilter: compute service is down.") {
		t.Fatalf("pinned request's message %q", err.Error())
	}
}

func TestSelectHTTPRejectsBadRequests(t *testing.T) {
	c := newCloud(t)
	srv := httptest.NewServer(c.scheduler(DefaultConfig()).Handler())
	defer srv.Close()
	for _, tc := range []struct {
		desc, method, body string
		status             int
		want               string
	}{
		{"not JSON", "POST", "{", 400, "not a RequestSpec"},
		{"no instances", "POST", `{"flavor":{"vcpus":1}}`, 400, "instance_uuids"},
		{"duplicate instance", "POST", `{"instance_uuids":["a","a"]}`, 400, "listed twice"},
		{"instance with a control character", "POST", `{"instance_uuids":["a\n"]}`, 400, "not an instance uuid"},
		{"group hint shaped like a key path", "POST", `{"instance_uuids":["a"],"scheduler_hints":{"group":"g/members/a"}}`, 400, "not a server group uuid"},
		{"same_host hint with a slash", "POST", `{"instance_uuids":["a"],"scheduler_hints":{"same_host":["../b"]}}`, 400, "not an instance uuid"},
		{"wrong method", "GET", "", 405, "use POST"},
		// A JSON string the decoder reads to the bound before it fails.
		{"body over the bound", "POST", `{"request_id":"` + strings.Repeat("x", maxSpecBytes) + `"}`, 413, fmt.Sprintf("at most %d bytes", maxSpecBytes)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+SelectPath, strings.NewReader(tc.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var eb ErrorBody
			if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || !strings.Contains(eb.Error.Message, tc.want) {
				t.Fatalf("got %d %+v, want %d mentioning %q", resp.StatusCode, eb.Error, tc.status, tc.want)
			}
		})
	}
}

func TestPoolFindsRegisteredSchedulers(t *testing.T) {
	c := newCloud(t)
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	for _, m := range []struct{ id, url string }{{"self", "http://127.0.0.1:1"}, {"other", "http://127.0.0.1:2"}} {
		reg := &members.Registration{Cli: c.cli, Keys: c.keys, Role: Role, ID: m.id, URL: m.url, TTL: 5 * time.Second, Log: hclog.NewNullLogger()}
		go reg.Run(ctx)
		<-reg.Registered()
	}
	w := members.NewWatcher(c.cli, c.keys, Role, hclog.NewNullLogger())
	go w.Run(ctx)
	local := c.scheduler(DefaultConfig())
	p := NewPool(local, "self", w, nil)
	testwait.Equal(t, "both registrations", 2, w.Count)
	ts := p.Targets()
	if len(ts) != 2 || ts[0].Name != "local" || ts[0].Selector != Selector(local) {
		t.Fatalf("want the local scheduler first and only the other remote, got %+v", ts)
	}
	if r, ok := ts[1].Selector.(*Remote); !ok || r.URL != "http://127.0.0.1:2" {
		t.Fatalf("second target = %+v, want the remote registered as other", ts[1])
	}
}
