package quotas

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/rawtxn"
)

// BenchmarkReserveServers is one create's quota check (count at one
// revision, check, guard) in a project of 10 servers, beside others'
// servers, with the per-project index built: the count reads the
// project's entries and four records per server of the project, so it
// no longer grows with the deployment. Nothing is committed, so the
// project never has a usage record: this is the check that counts (a
// project's first, or one near its limit); BenchmarkReserveAtScale is
// the usual one.
func BenchmarkReserveServers(b *testing.B) {
	for _, others := range []int{0, 1000, 10000} {
		b.Run(fmt.Sprintf("%d other servers", others), func(b *testing.B) {
			cli := etcdtest.Client(b)
			keys := etcdschema.New("/b")
			ctx := context.Background()
			flavor := etcdschema.Flavor{VCPUs: 1, RAMMB: 512}
			var ops []clientv3.Op
			flush := func() {
				if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
					b.Fatal(err)
				}
				ops = ops[:0]
			}
			for i := range others + 10 {
				project := "other"
				if i < 10 {
					project = "p"
				}
				uuid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
				ops = append(ops,
					clientv3.OpPut(keys.InstanceMapping(uuid), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: uuid, ProjectID: project})),
					clientv3.OpPut(keys.BuildRequest(uuid), etcdschema.MustEncode(&etcdschema.BuildRequest{InstanceUUID: uuid,
						ProjectID: project, Flavor: flavor})))
				if len(ops) >= 100 {
					flush()
				}
			}
			if len(ops) > 0 {
				flush()
			}
			if _, err := BuildIndex(ctx, cli, keys, testFence(b, cli, keys), "bench"); err != nil {
				b.Fatal(err)
			}
			s := New(cli, keys, Limits{Instances: 1000, Cores: 1000}, nil)
			b.ResetTimer()
			for range b.N {
				if _, _, err := s.ReserveServers(ctx, ServerRequest{Project: "p", Min: 1, Max: 1, VCPUs: 1, RAMMB: 512}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCountAtScale is one project's count (Count, as every create's
// check makes it) in a deployment of 10,000 placed servers spread over
// 100 projects, each server an instance mapping, an ACTIVE instance in a
// cell and a consumer holding its VCPU and MEMORY_MB: issue 20's case,
// counted from every mapping (the records of a Berth without the index),
// then from the per-project index once the leader built it.
func BenchmarkCountAtScale(b *testing.B) {
	const servers, projects = 10000, 100
	cli := etcdtest.Client(b)
	keys := etcdschema.New("/bscale")
	ctx := context.Background()
	seedPlaced(b, cli, keys, servers, projects)
	s := New(cli, keys, Limits{Instances: 1000, Cores: 1000}, nil)
	run := func(b *testing.B) {
		u, _, err := s.Count(ctx, "p-7", "")
		if err != nil || u.Instances != servers/projects || u.Cores != servers/projects {
			b.Fatalf("count of p-7: %+v, %v; want %d instances and cores", u, err, servers/projects)
		}
		b.ResetTimer()
		for i := range b.N {
			if _, _, err := s.Count(ctx, fmt.Sprintf("p-%d", i%projects), ""); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("every mapping", run)
	if _, err := BuildIndex(ctx, cli, keys, testFence(b, cli, keys), "bench"); err != nil {
		b.Fatal(err)
	}
	b.Run("per-project index", run)
}

// seedPlaced stores n ACTIVE servers of one VCPU and 512 MB in cell1,
// server i in project "p-<i mod projects>", as a create and a claim
// leave them: mapping, instance, consumer.
func seedPlaced(tb testing.TB, cli *clientv3.Client, keys etcdschema.Keys, n, projects int) {
	tb.Helper()
	ctx := context.Background()
	flavor := etcdschema.Flavor{Name: "m1.tiny", VCPUs: 1, RAMMB: 512}
	var ops []clientv3.Op
	flush := func() {
		if _, err := cli.Txn(ctx).Then(ops...).Commit(); err != nil {
			tb.Fatal(err)
		}
		ops = ops[:0]
	}
	for i := range n {
		project := fmt.Sprintf("p-%d", i%projects)
		uuid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		ops = append(ops, seedPlacedOps(keys, uuid, project, flavor)...)
		if len(ops) >= 100 {
			flush()
		}
	}
	if len(ops) > 0 {
		flush()
	}
}

// atScale is the at-scale benchmarks' cloud under prefix: servers ACTIVE
// servers in projects projects (seedPlaced), the quota index built, and a
// quota service whose limits the benchmarks' creates stay under.
func atScale(b *testing.B, prefix string, servers, projects int) (*clientv3.Client, etcdschema.Keys, *Store) {
	cli := etcdtest.Client(b)
	keys := etcdschema.New(prefix)
	seedPlaced(b, cli, keys, servers, projects)
	if _, err := BuildIndex(context.Background(), cli, keys, testFence(b, cli, keys), "bench"); err != nil {
		b.Fatal(err)
	}
	return cli, keys, New(cli, keys, Limits{Instances: 100000, Cores: 100000, RAM: 100000 * 512}, nil)
}

// createOps are the keys servers.Create stores with a create's quota
// writes: the mapping, the quota index entry and the build request.
func createOps(keys etcdschema.Keys, uuid, project string) []clientv3.Op {
	flavor := etcdschema.Flavor{Name: "m1.tiny", VCPUs: 1, RAMMB: 512}
	return []clientv3.Op{
		clientv3.OpPut(keys.InstanceMapping(uuid), etcdschema.MustEncode(&etcdschema.InstanceMapping{InstanceUUID: uuid, ProjectID: project})),
		clientv3.OpPut(keys.QuotaInstance(project, uuid), etcdschema.MustEncode(&etcdschema.QuotaInstance{})),
		clientv3.OpPut(keys.BuildRequest(uuid), etcdschema.MustEncode(&etcdschema.BuildRequest{InstanceUUID: uuid,
			ProjectID: project, UserID: "u", Flavor: flavor})),
	}
}

// BenchmarkReserveAtScale is one create's quota check and its commit (the
// guard with the create's mapping and build request, as servers.Create
// commits them) in a project of 100 ACTIVE servers among 10,000 in 100
// projects, with cores and instances limited as Nova's defaults limit
// them (raised so the creates fit): the check every create makes. Each
// project's first create is made before the timer starts.
func BenchmarkReserveAtScale(b *testing.B) {
	const servers, projects = 10000, 100
	cli, keys, s := atScale(b, "/bres", servers, projects)
	ctx := context.Background()
	create := func(project string, i int) {
		r := ServerRequest{Project: project, User: "u", Min: 1, Max: 1, VCPUs: 1, RAMMB: 512}
		for {
			_, g, err := s.ReserveServers(ctx, r)
			if err != nil {
				b.Fatal(err)
			}
			uuid := fmt.Sprintf("10000000-0000-4000-8000-%012d", i)
			ops := append(g.Ops, createOps(keys, uuid, project)...)
			resp, err := cli.Txn(ctx).If(g.Cmps...).Then(ops...).Commit()
			if err != nil {
				b.Fatal(err)
			}
			if resp.Succeeded {
				return
			}
		}
	}
	for p := range projects {
		create(fmt.Sprintf("p-%d", p), servers+p)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU(b)
	for i := range b.N {
		create(fmt.Sprintf("p-%d", i%projects), i)
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the user and system CPU this process has used (the
// etcd server's too: it runs in the test's process).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPlanAtScale is BenchmarkReserveAtScale's create through a
// batch's plan (PlanServers) instead: the share's comparisons and fence
// write with the create's mapping and build request, committed, with
// creates (a share's size: 1 when alone in the process, more when others
// are ready with it) in each request. ns/op and allocs/op are per create.
func BenchmarkPlanAtScale(b *testing.B) {
	const servers, projects = 10000, 100
	cli, keys, s := atScale(b, "/bplan", servers, projects)
	ctx := context.Background()
	r := ServerRequest{Project: "", User: "u", Min: 1, Max: 1, VCPUs: 1, RAMMB: 512}
	next := 0
	// share stores n creates of project in one request (the first of a
	// project counts, alone, as ReserveAtScale's first does).
	share := func(project string, n int) {
		reqs := make([]ServerRequest, n)
		for i := range reqs {
			reqs[i] = r
			reqs[i].Project = project
		}
		for {
			p, err := s.PlanServers(ctx, project, "bench", reqs)
			if err != nil {
				b.Fatal(err)
			}
			if !p.Admitted() {
				_, g, err := s.ReserveServers(ctx, reqs[0])
				if err != nil {
					b.Fatal(err)
				}
				if _, err := cli.Txn(ctx).If(g.Cmps...).Then(g.Ops...).Commit(); err != nil {
					b.Fatal(err)
				}
				continue
			}
			ops := slices.Clip(p.Ops)
			for range n {
				uuid := fmt.Sprintf("10000000-0000-4000-8000-%012d", next)
				next++
				var sub []*pb.RequestOp
				for _, op := range createOps(keys, uuid, project) {
					sub = append(sub, rawtxn.Put(string(op.KeyBytes()), string(op.ValueBytes())))
				}
				ops = append(ops, rawtxn.Nested(&pb.TxnRequest{Success: sub}))
			}
			// One project's share is the whole request, as servers sends it.
			resp, err := rawtxn.Commit(ctx, cli, &pb.TxnRequest{Compare: p.Cmps, Success: ops, Failure: p.Refresh})
			if err != nil {
				b.Fatal(err)
			}
			if resp.Succeeded {
				s.PlanCommitted(p, resp.Header.Revision)
				return
			}
			s.PlanFailed(p, resp.Responses, resp.Header.Revision)
		}
	}
	for p := range projects {
		share(fmt.Sprintf("p-%d", p), 1)
	}
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("%d a share", n), func(b *testing.B) {
			b.ReportAllocs()
			i, cpu0 := 0, processCPU(b)
			for b.Loop() {
				share(fmt.Sprintf("p-%d", i%projects), n)
				i++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(i*n), "ns/create")
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(i*n), "cpu-ns/create")
		})
	}
}

// BenchmarkPlanServersBuild is PlanServers alone on a remembered state
// (no etcd request): what planning one create's share costs the API,
// its comparisons and fence write built.
func BenchmarkPlanServersBuild(b *testing.B) {
	ctx := context.Background()
	cli := etcdtest.Client(b)
	s := New(cli, etcdschema.New("/bbuild"), Limits{Instances: 1 << 30, Cores: Unlimited, RAM: Unlimited}, nil)
	r := ServerRequest{Project: "p", User: "u", Min: 1, Max: 1, VCPUs: 1, RAMMB: 512}
	_, g, err := s.ReserveServers(ctx, r) // a counted create leaves the record plans check
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cli.Txn(ctx).If(g.Cmps...).Then(g.Ops...).Commit(); err != nil {
		b.Fatal(err)
	}
	reqs := []ServerRequest{r}
	b.ReportAllocs()
	for b.Loop() {
		p, err := s.PlanServers(ctx, "p", "req", reqs)
		if err != nil || !p.Admitted() || len(p.Cmps) != 2 {
			b.Fatalf("plan: %v, admitted %v", err, p != nil && p.Admitted())
		}
	}
}
