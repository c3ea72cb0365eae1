package httpserve_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/compute"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/httpserve"
	"github.com/berth-project/berth/placement"
	"github.com/berth-project/berth/placement/httpapi"
)

// quorumRequest is one request of TestQuorumLossAnswersWithinTheDeadline
// and the error shape its API must answer 503 in.
type quorumRequest struct {
	desc, method, path, body string
	placement                bool // to the Placement listener
	shape                    func(map[string]any) bool
}

// novaFault is the compute API's (and /v1's) 503: Nova's wsgi.Fault.
func novaFault(out map[string]any) bool {
	f, ok := out["serviceUnavailable"].(map[string]any)
	return ok && f["code"] == 503.0 && f["message"] != ""
}

// placementError is Placement's JSON error document for a 503.
func placementError(out map[string]any) bool {
	errs, ok := out["errors"].([]any)
	if !ok || len(errs) != 1 {
		return false
	}
	e, _ := errs[0].(map[string]any)
	return e["status"] == 503.0 && e["title"] == "Service Unavailable"
}

// TestQuorumLossAnswersWithinTheDeadline stops two of three etcd members
// and sends each kind of request the APIs serve, all at once, to listeners
// with a request deadline: every one must answer 503, in its API's error
// shape, within the deadline and a margin. Without the deadline, reads
// (which the etcd client retries while its context lasts) and writes held
// their clients until read_timeout, or for ever without one.
func TestQuorumLossAnswersWithinTheDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster")
	}
	const (
		deadline = 2 * time.Second
		// margin covers answering after the deadline on a loaded machine:
		// the etcd calls return as soon as their context ends.
		margin = 3 * time.Second
		bound  = deadline + margin
	)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := etcdtest.StartCluster(t, 3)
	cli := c.Client()
	keys := etcdschema.New("/t")
	log := hclog.NewNullLogger()
	p := placement.New(cli, keys, log)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	const rp = "5f0a9e4c-1b7d-4a37-9a8e-2e6c1f0d3b21"
	if err := p.EnsureProvider(ctx, rp, "h1", ""); err != nil {
		t.Fatal(err)
	}
	if err := api.EnsureFlavors(ctx, cli, keys, api.DefaultFlavors()); err != nil {
		t.Fatal(err)
	}
	v1 := api.New(cli, keys, p, log)
	nova := compute.New(cli, keys, log)
	limits := httpserve.Limits{RequestTimeout: deadline, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: time.Minute, WriteTimeout: 90 * time.Second, IdleTimeout: time.Minute}
	computeURL := serve(t, "compute API", nova.Beside(v1), limits)
	placementURL := serve(t, "placement", httpapi.New(p, log, httpapi.Options{}), limits)

	requests := []quorumRequest{
		{desc: "/v1 server create", method: "POST", path: "/v1/servers",
			body: `{"server":{"name":"s","flavorRef":"m1.tiny"}}`, shape: novaFault},
		{desc: "/v1 server list", method: "GET", path: "/v1/servers", shape: novaFault},
		{desc: "/v1 server show", method: "GET", path: "/v1/servers/6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11", shape: novaFault},
		{desc: "compute flavor create", method: "POST", path: "/v2.1/flavors",
			body: `{"flavor":{"name":"q1","ram":512,"vcpus":1,"disk":1,"id":"q1"}}`, shape: novaFault},
		{desc: "compute flavor show", method: "GET", path: "/v2.1/flavors/1", shape: novaFault},
		{desc: "compute flavor list", method: "GET", path: "/v2.1/flavors/detail", shape: novaFault},
		{desc: "placement provider list", method: "GET", path: "/resource_providers", placement: true, shape: placementError},
		{desc: "placement provider show", method: "GET", path: "/resource_providers/" + rp, placement: true, shape: placementError},
		{desc: "placement provider create", method: "POST", path: "/resource_providers",
			body: `{"name":"rp2"}`, placement: true, shape: placementError},
		{desc: "placement allocations write", method: "PUT", path: "/allocations/6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11",
			body: `{"allocations":[{"resource_provider":{"uuid":"` + rp + `"},"resources":{"VCPU":1}}]}`, placement: true, shape: placementError},
	}
	// With the quorum, every request is answered by its handler (not 503).
	for _, q := range requests {
		if status, _, _ := send(t, q, computeURL, placementURL); status == http.StatusServiceUnavailable || status >= 500 {
			t.Fatalf("%s with the quorum: status %d", q.desc, status)
		}
	}

	c.Stop(1)
	c.Stop(2)
	type answer struct {
		status  int
		out     map[string]any
		elapsed time.Duration
	}
	answers := make([]chan answer, len(requests))
	for i, q := range requests {
		answers[i] = make(chan answer, 1)
		go func() {
			start := time.Now()
			status, out, _ := send(t, q, computeURL, placementURL)
			answers[i] <- answer{status, out, time.Since(start)}
		}()
	}
	for i, q := range requests {
		a := <-answers[i]
		t.Logf("%s: %d after %s", q.desc, a.status, a.elapsed.Round(time.Millisecond))
		if a.status != http.StatusServiceUnavailable || !q.shape(a.out) {
			t.Errorf("%s without a quorum: status %d, body %v; want 503 in the API's error shape", q.desc, a.status, a.out)
		}
		if a.elapsed > bound {
			t.Errorf("%s without a quorum answered after %s, past the deadline %s and margin %s", q.desc, a.elapsed, deadline, margin)
		}
	}
}

// serve serves h through httpserve under limits on a loopback port.
func serve(t *testing.T, name string, h http.Handler, limits httpserve.Limits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpserve.New(name, h, limits, hclog.NewNullLogger())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// send sends q with a client timeout far past any bound the test asserts
// (a hang shows as a failure, not a stuck test) and decodes the answer.
func send(t *testing.T, q quorumRequest, computeURL, placementURL string) (int, map[string]any, error) {
	base := computeURL
	if q.placement {
		base = placementURL
	}
	req, err := http.NewRequest(q.method, base+q.path, strings.NewReader(q.body))
	if err != nil {
		return 0, nil, err
	}
	if q.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-Auth-Token", "admin")
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("%s: %v", q.desc, err)
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, nil
}
