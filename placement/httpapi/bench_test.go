package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// populate writes n compute providers with VCPU, MEMORY_MB and DISK_GB
// straight into etcd (100 a transaction), every tenth one disabled.
func populate(b testing.TB, cli *clientv3.Client, keys etcdschema.Keys, n int) {
	b.Helper()
	ctx := context.Background()
	var ops []clientv3.Op
	flush := func() {
		if len(ops) == 0 {
			return
		}
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
		ops = ops[:0]
	}
	for i := 0; i < n; i++ {
		uuid := fmt.Sprintf("00000000-0000-0000-0000-%012d", i)
		p := &etcdschema.Provider{UUID: uuid, Name: fmt.Sprintf("host%d", i), RootProviderUUID: uuid,
			Usages: map[string]int64{}, Traits: []string{}, Aggregates: []string{}}
		p.Inventories = map[string]etcdschema.Inventory{placement.VCPU: inv(64), placement.MemoryMB: inv(262144), placement.DiskGB: inv(2000)}
		if i%10 == 0 {
			p.Traits = []string{placement.TraitComputeStatusDisabled}
		}
		ops = append(ops, clientv3.OpPut(keys.Provider(p.UUID), etcdschema.MustEncode(p)))
		if len(ops) == 100 {
			flush()
		}
	}
	flush()
}

// candidatesBenchPath is the benchmarks' request: three classes, the
// disabled hosts forbidden, limit 1000 (the scheduler's shape).
const candidatesBenchPath = "/allocation_candidates?resources=VCPU:2,MEMORY_MB:4096,DISK_GB:20&required=!COMPUTE_STATUS_DISABLED&limit=1000"

// benchCandidatesHTTP times GET /allocation_candidates over loopback HTTP
// with a keep-alive client that reads every answer whole, and reports
// the median and p99 round trip besides ns/op.
func benchCandidatesHTTP(b *testing.B, n int) {
	s, cli := newStarted(b)
	populate(b, cli, testKeys, n)
	if err := s.SyncIndex(testCtx(b)); err != nil {
		b.Fatal(err)
	}
	srv := newServer(b, s)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	b.Cleanup(client.CloseIdleConnections)
	req, _ := http.NewRequest("GET", srv.URL+candidatesBenchPath, nil)
	req.Header.Set("X-Auth-Token", "admin")
	req.Header.Set("OpenStack-API-Version", "placement 1.35")
	lat := make([]time.Duration, 0, b.N)
	cpu0 := processCPU(b)
	var size int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		size, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%v %d", err, resp.StatusCode)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(size), "body-B")
}

// BenchmarkCandidatesHTTP1kParallel is the 1,000-provider request from
// eight clients at once (a scheduler's workers): concurrent requests
// share their etcd revision reads (placement's revisionReads).
func BenchmarkCandidatesHTTP1kParallel(b *testing.B) {
	s, cli := newStarted(b)
	populate(b, cli, testKeys, 1_000)
	if err := s.SyncIndex(testCtx(b)); err != nil {
		b.Fatal(err)
	}
	srv := newServer(b, s)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	b.Cleanup(client.CloseIdleConnections)
	cpu0 := processCPU(b)
	b.ReportAllocs()
	b.SetParallelism(4) // 4 × GOMAXPROCS clients
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest("GET", srv.URL+candidatesBenchPath, nil)
		req.Header.Set("X-Auth-Token", "admin")
		req.Header.Set("OpenStack-API-Version", "placement 1.35")
		for pb.Next() {
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				b.Errorf("%v %d", err, resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

func BenchmarkCandidatesHTTP1k(b *testing.B)   { benchCandidatesHTTP(b, 1_000) }
func BenchmarkCandidatesHTTP10k(b *testing.B)  { benchCandidatesHTTP(b, 10_000) }
func BenchmarkCandidatesHTTP100k(b *testing.B) { benchCandidatesHTTP(b, 100_000) }

// processCPU is the process's user and system CPU so far: on a shared
// machine the CPU a request costs (client, server and collector in this
// process) is steadier than its wall time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discardWriter is a ResponseWriter that keeps the headers and counts
// the body, so the handler benchmark measures the handler alone.
type discardWriter struct {
	h http.Header
	n int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// BenchmarkCandidatesHandler1k is the same request through the API's
// handler with no network: the search plus the answer's encoding, whose
// allocations this counts alone.
func BenchmarkCandidatesHandler1k(b *testing.B) {
	s, cli := newStarted(b)
	populate(b, cli, testKeys, 1_000)
	if err := s.SyncIndex(testCtx(b)); err != nil {
		b.Fatal(err)
	}
	h := New(s, nil, Options{})
	req := httptest.NewRequest("GET", candidatesBenchPath, nil)
	req.Header.Set("X-Auth-Token", "admin")
	req.Header.Set("OpenStack-API-Version", "placement 1.35")
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := 0; i < b.N; i++ {
		clear(w.h)
		w.n = 0
		h.ServeHTTP(w, req)
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(w.n), "body-B")
}
