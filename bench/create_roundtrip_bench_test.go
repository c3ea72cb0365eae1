package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/compute"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/identity/identitytest"
	"github.com/berth-project/berth/images"
	"github.com/berth-project/berth/internal/audit"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/httpserve"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/status"
	"github.com/berth-project/berth/quotas"
)

// BenchmarkNovaCreateRoundTrip is the tool's novaClient.createServer
// against the compute API wrapped as `berth server` serves it (audit,
// metrics, status paths, httpserve's limits with the default http block)
// on a real etcd, 64 clients at once as `berth bench boot -clients 64`:
// its cpu-ns/op and allocs/op are the API role's and the tool's clients'
// cost per server, the etcd member's share of the create's W1 included.
func BenchmarkNovaCreateRoundTrip(b *testing.B) {
	ctx := context.Background()
	cli := etcdtest.Client(b)
	keys := etcdschema.New("/bench-roundtrip")
	if err := api.EnsureFlavors(ctx, cli, keys, api.DefaultFlavors()); err != nil {
		b.Fatal(err)
	}
	if err := images.EnsureDefaults(ctx, cli, keys, images.Defaults(time.Now().UTC())); err != nil {
		b.Fatal(err)
	}
	svc, err := identity.New(identitytest.Directory(b, time.Hour), []byte("the bench's token signing key, 32+ bytes"))
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
	m := metrics.New()
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: discard{}})
	h := status.Mount(m.InstrumentHTTP("compute API", audit.Handler("compute", log, nova)), status.New(m).Handler())
	hc := configs.Defaults().HTTP
	srv := httpserve.New("compute API", h, httpserve.Limits{ReadHeaderTimeout: hc.ReadHeaderTimeout, ReadTimeout: hc.ReadTimeout,
		WriteTimeout: hc.WriteTimeout, IdleTimeout: hc.IdleTimeout, RequestTimeout: hc.RequestTimeout,
		MaxHeaderBytes: int(hc.MaxHeaderBytes), MaxBodyBytes: hc.MaxBodyBytes, MaxConnections: int(hc.MaxConnections)}, log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	const clients = 64
	tr := newTransport(clients)
	b.Cleanup(tr.CloseIdleConnections)
	c := newNovaClient("http://"+ln.Addr().String(), &http.Client{Transport: tr}, nil)
	c.setToken(tok.ID)
	b.ReportAllocs()
	b.SetParallelism(clients / max(1, runtime.GOMAXPROCS(0)))
	var n atomic.Int64
	cpu0 := rusageCPU(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.createServer(ctx, api.CreateRequest{Name: "bench-1", Flavor: "m1.tiny"}); err != nil {
				b.Error(err)
				return
			}
			n.Add(1)
		}
	})
	b.ReportMetric(float64(rusageCPU(b)-cpu0)/float64(max(1, n.Load())), "cpu-ns/op")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// rusageCPU is the user and system CPU this process has used.
func rusageCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNovaClientCreate is the tool's side of a create alone: 64
// clients' novaClient.createServer against a handler that answers every
// POST with a canned Nova create answer (202, the API's headers and
// body), through net/http's client and through the lean one.
func BenchmarkNovaClientCreate(b *testing.B) {
	answer := []byte(`{"server": {"id": "0b9bd5b3-6d4e-4f4e-9d31-2f6f3f1f0c6e", "links": [{"rel": "self", ` +
		`"href": "http://127.0.0.1/v2.1/servers/0b9bd5b3-6d4e-4f4e-9d31-2f6f3f1f0c6e"}, {"rel": "bookmark", ` +
		`"href": "http://127.0.0.1/servers/0b9bd5b3-6d4e-4f4e-9d31-2f6f3f1f0c6e"}], "OS-DCF:diskConfig": "MANUAL", ` +
		`"security_groups": [{"name": "default"}], "adminPass": "Zq5rT2uV8xY3"}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil || r.Header.Get("X-Auth-Token") != "bench:bench" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Location", "http://127.0.0.1/v2.1/servers/0b9bd5b3-6d4e-4f4e-9d31-2f6f3f1f0c6e")
		h.Set("OpenStack-API-Version", "compute 2.74")
		h.Set("X-OpenStack-Nova-API-Version", "2.74")
		h.Set("Vary", "OpenStack-API-Version, X-OpenStack-Nova-API-Version")
		h.Set("X-OpenStack-Request-Id", "req-6c1d2a8e-9a43-4c1e-8d0f-5b7e3a2c9d10")
		h.Set("X-Compute-Request-Id", "req-6c1d2a8e-9a43-4c1e-8d0f-5b7e3a2c9d10")
		w.WriteHeader(http.StatusAccepted)
		w.Write(answer)
	}))
	b.Cleanup(srv.Close)
	for _, lean := range []bool{false, true} {
		b.Run(fmt.Sprintf("lean=%v", lean), func(b *testing.B) {
			tr := newTransport(64)
			b.Cleanup(tr.CloseIdleConnections)
			c := newNovaClient(srv.URL, &http.Client{Transport: tr, Timeout: 30 * time.Second}, nil)
			if c.lean == nil {
				b.Fatal("no lean client for a plain-http endpoint")
			}
			if !lean {
				c.lean = nil
			} else {
				b.Cleanup(c.lean.closeIdle)
			}
			b.ReportAllocs()
			b.SetParallelism(64 / max(1, runtime.GOMAXPROCS(0)))
			cpu0 := rusageCPU(b)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if id, err := c.createServer(context.Background(), api.CreateRequest{Name: "bench-1", Flavor: "m1.tiny"}); err != nil || id == "" {
						b.Errorf("create: %q %v", id, err)
						return
					}
				}
			})
			b.ReportMetric(float64(rusageCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
