package compute_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/compute"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/identity/identitytest"
	"github.com/berth-project/berth/images"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/quotas"
)

// BenchmarkServerCreate is one POST /v2.1/servers as `berth bench boot`
// sends it: a project member's keystone token, microversion 2.74, a
// default flavor and the fake driver's default image, over real HTTP
// (keep-alive) to the compute API on a real etcd, with the bench's
// unlimited quotas. Its ns/op and allocs/op are the compute API role's
// cost per server created (the etcd server's share included: it runs in
// the test's process, as in `berth bench`).
func BenchmarkServerCreate(b *testing.B) {
	rig := newCreateRig(b)
	b.ReportAllocs()
	cpu0, rev0 := processCPU(b), rig.revision(b)
	n := 0
	for b.Loop() {
		n++
		rig.create(b)
	}
	rig.report(b, n, cpu0, rev0)
}

// BenchmarkServerCreateParallel is BenchmarkServerCreate with 64 clients
// at once, as `berth bench boot -clients 64` sends them, all in one
// project: the creates ready together share etcd requests (servers'
// create batches), which revisions/op shows.
func BenchmarkServerCreateParallel(b *testing.B) {
	rig := newCreateRig(b)
	b.ReportAllocs()
	b.SetParallelism(64 / max(1, runtime.GOMAXPROCS(0)))
	cpu0, rev0 := processCPU(b), rig.revision(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			rig.create(b)
		}
	})
	rig.report(b, b.N, cpu0, rev0)
}

// createRig is a compute API over real HTTP and a real etcd, and a
// project member's token, for the create benchmarks.
type createRig struct {
	cli    *clientv3.Client
	url    string
	client *http.Client
	token  string
	body   []byte
}

func newCreateRig(b *testing.B) *createRig {
	ctx := context.Background()
	cli := etcdtest.Client(b)
	keys := etcdschema.New("/bench-create")
	if err := api.EnsureFlavors(ctx, cli, keys, api.DefaultFlavors()); err != nil {
		b.Fatal(err)
	}
	if err := images.EnsureDefaults(ctx, cli, keys, images.Defaults(time.Now().UTC())); err != nil {
		b.Fatal(err)
	}
	key := []byte("the bench's token signing key, 32+ bytes")
	svc, err := identity.New(identitytest.Directory(b, time.Hour), key)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := svc.Issue(identity.PasswordAuth{UserName: "member-a", Password: identitytest.Password,
		Scope: identity.Scope{ProjectName: "A"}})
	if err != nil {
		b.Fatal(err)
	}
	nova := compute.New(cli, keys, hclog.NewNullLogger())
	nova.SetAuth(compute.Auth{Mode: compute.AuthKeystone, Verifier: svc.Verifier()})
	nova.SetImages(images.NewStore(cli, keys))
	unlimited := quotas.Limits{}
	for _, r := range []string{quotas.Instances, quotas.Cores, quotas.RAM, quotas.ServerGroups, quotas.ServerGroupMembers} {
		unlimited[r] = quotas.Unlimited
	}
	nova.SetQuotaDefaults(unlimited)
	srv := httptest.NewServer(nova)
	b.Cleanup(srv.Close)
	client := srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 128
	b.Cleanup(client.CloseIdleConnections)
	return &createRig{cli: cli, url: srv.URL, client: client, token: tok.ID,
		body: []byte(`{"server": {"name": "bench-1", "flavorRef": "1", "imageRef": "` +
			images.DefaultID(images.DefaultFakeImage) + `", "networks": "none"}}`)}
}

// create is one POST /v2.1/servers, which must be accepted.
func (r *createRig) create(b *testing.B) {
	req, err := http.NewRequest(http.MethodPost, r.url+"/v2.1/servers", bytes.NewReader(r.body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("X-Auth-Token", r.token)
	req.Header.Set("OpenStack-API-Version", "compute 2.74")
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted {
		b.Fatalf("create: %d %s %v", resp.StatusCode, out, err)
	}
}

// revision is etcd's current revision.
func (r *createRig) revision(b *testing.B) int64 {
	resp, err := r.cli.Get(context.Background(), "/bench-create/none", clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	return resp.Header.Revision
}

// report reports the process CPU and the etcd revisions per create since
// cpu0 and rev0. Process CPU, not wall time, is the figure to compare on
// a shared machine: every thread of the process (the etcd server's too).
func (r *createRig) report(b *testing.B, n int, cpu0 time.Duration, rev0 int64) {
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(n), "cpu-ns/op")
	b.ReportMetric(float64(r.revision(b)-rev0)/float64(n), "revisions/op")
}

// processCPU is the user and system CPU this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
