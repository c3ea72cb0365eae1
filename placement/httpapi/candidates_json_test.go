package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/placement"
)

// referenceCandidatesJSON is GET /allocation_candidates' answer as the
// API wrote it before candidatesJSON: nested maps handed to
// encoding/json. It stays here as the reference the streaming encoder
// must match byte for byte.
func referenceCandidatesJSON(mv int, requested map[string]bool, cands *placement.Candidates) []byte {
	atLeast := func(minor int) bool { return mv >= minor }
	areqs := make([]any, 0, len(cands.AllocationRequests))
	for _, ar := range cands.AllocationRequests {
		if !atLeast(12) {
			var list []any
			for _, rp := range sortedKeys(ar.Allocations) {
				list = append(list, map[string]any{
					"resource_provider": map[string]string{"uuid": rp},
					"resources":         ar.Allocations[rp].Resources,
				})
			}
			areqs = append(areqs, map[string]any{"allocations": list})
			continue
		}
		o := map[string]any{"allocations": ar.Allocations}
		if atLeast(34) {
			o["mappings"] = ar.Mappings
		}
		areqs = append(areqs, o)
	}
	order := cands.SummaryOrder()
	sums := make(orderedObject, 0, len(order))
	for _, rp := range order {
		ps := cands.ProviderSummaries[rp]
		res := map[string]any{}
		for rc, r := range ps.Resources {
			if !atLeast(27) && !requested[rc] {
				continue
			}
			res[rc] = map[string]int64{"capacity": r.Capacity, "used": r.Used}
		}
		o := map[string]any{"resources": res}
		if atLeast(17) {
			t := ps.Traits
			if t == nil {
				t = []string{}
			}
			o["traits"] = traitOrder(t)
		}
		if atLeast(29) {
			var parent any
			if ps.ParentProviderUUID != "" {
				parent = ps.ParentProviderUUID
			}
			o["parent_provider_uuid"] = parent
			o["root_provider_uuid"] = ps.RootProviderUUID
		}
		sums = append(sums, member{rp, o})
	}
	b, err := json.Marshal(map[string]any{"allocation_requests": areqs, "provider_summaries": sums})
	if err != nil {
		panic(err)
	}
	return b
}

// encodeCandidates is the handler's encoding of cands at mv.
func encodeCandidates(mv int, requested map[string]bool, cands *placement.Candidates) []byte {
	e := candidatesJSON{mv: mv, requested: requested}
	e.encode(cands.Ordered())
	return e.buf
}

// diffAt describes where got and want first differ.
func diffAt(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-80)
	return fmt.Sprintf("first difference at byte %d (of %d, want %d):\n got ...%s\nwant ...%s",
		i, len(got), len(want), got[from:min(len(got), i+80)], want[from:min(len(want), i+80)])
}

// randomCandidates builds an answer by hand with the shapes the index
// never makes as well: names needing escapes, nil maps and lists, many
// providers and groups in one request, custom and standard traits.
func randomCandidates(r *rand.Rand) *placement.Candidates {
	names := []string{"VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_Z", "CUSTOM_A<&>", "SRIOV_NET_VF", "CUSTOM_\u00e9\u2028"}
	traits := []string{"HW_CPU_X86_AVX2", "CUSTOM_FOO", "COMPUTE_STATUS_DISABLED", "CUSTOM_\"Q\"", "MISC_SHARES_VIA_AGGREGATE", "CUSTOM_ABC"}
	nprov := 1 + r.Intn(12)
	uuids := make([]string, nprov)
	for i := range uuids {
		uuids[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", r.Uint32(), i)
		if r.Intn(10) == 0 {
			uuids[i] = "odd<" + uuids[i] + ">\\\x01"
		}
	}
	pick := func(from []string, n int) []string {
		var out []string
		for _, j := range r.Perm(len(from))[:min(n, len(from))] {
			out = append(out, from[j])
		}
		return out
	}
	resources := func() map[string]int64 {
		if r.Intn(15) == 0 {
			return nil
		}
		m := map[string]int64{}
		for _, rc := range pick(names, r.Intn(5)) {
			m[rc] = r.Int63n(1 << 40)
		}
		return m
	}
	c := &placement.Candidates{ProviderSummaries: map[string]placement.ProviderSummary{}}
	if r.Intn(8) > 0 {
		c.AllocationRequests = []placement.AllocationRequest{}
	}
	shared := resources()
	for range r.Intn(8) {
		ar := placement.AllocationRequest{}
		if r.Intn(12) > 0 {
			ar.Allocations = map[string]placement.ProviderAllocation{}
			for _, u := range pick(uuids, r.Intn(4)) {
				res := shared // render shares one map among requests
				if r.Intn(2) == 0 {
					res = resources()
				}
				ar.Allocations[u] = placement.ProviderAllocation{Resources: res}
			}
		}
		if r.Intn(6) > 0 {
			ar.Mappings = map[string][]string{}
			for _, sfx := range pick([]string{"", "1", "_NET", "a-b", "Z9"}, r.Intn(4)) {
				var l []string
				if r.Intn(10) > 0 {
					l = pick(uuids, 1+r.Intn(2))
				}
				ar.Mappings[sfx] = l
			}
		}
		c.AllocationRequests = append(c.AllocationRequests, ar)
	}
	for _, u := range pick(uuids, r.Intn(nprov+1)) {
		ps := placement.ProviderSummary{Resources: map[string]placement.ResourceSummary{}, RootProviderUUID: u}
		for _, rc := range pick(names, r.Intn(5)) {
			ps.Resources[rc] = placement.ResourceSummary{Capacity: r.Int63n(1 << 20), Used: r.Int63n(1 << 20)}
		}
		if r.Intn(10) == 0 {
			ps.Resources = nil
		}
		if r.Intn(3) > 0 {
			ps.Traits = pick(traits, r.Intn(5))
		}
		if r.Intn(2) == 0 {
			ps.ParentProviderUUID = uuids[r.Intn(nprov)]
			ps.RootProviderUUID = uuids[r.Intn(nprov)]
		}
		c.ProviderSummaries[u] = ps
	}
	return c
}

// TestCandidatesJSONMatchesReference: the streaming encoder writes the
// reference's bytes for hand-built answers of every shape, at every
// microversion.
func TestCandidatesJSONMatchesReference(t *testing.T) {
	r := rand.New(rand.NewSource(20))
	for i := range 400 {
		c := randomCandidates(r)
		requested := map[string]bool{"VCPU": true, "CUSTOM_A<&>": true}
		for mv := 0; mv <= maxMinor; mv++ {
			want := referenceCandidatesJSON(mv, requested, c)
			if got := encodeCandidates(mv, requested, c); !bytes.Equal(got, want) {
				t.Fatalf("answer %d, 1.%d: %s", i, mv, diffAt(got, want))
			}
		}
	}
}

// TestCandidatesJSONMatchesReferenceOverHTTP builds random clouds (trees
// of nested providers, providers shared through aggregates, traits,
// usages), asks random queries (granular groups, group policies,
// required and forbidden traits, member_of, same_subtree, limits) at
// every microversion over HTTP, and compares each answer's bytes with
// the reference encoding of the same search. Between rounds it claims
// and changes providers, so the summaries kept with a provider's record
// must follow it.
func TestCandidatesJSONMatchesReferenceOverHTTP(t *testing.T) {
	a := newAPI(t)
	ctx := testCtx(t)
	r := rand.New(rand.NewSource(2026))
	const agg = "5a000000-0000-4000-8000-000000000001"
	parser := &API{svc: a.s}
	a.must(201, "PUT", "/resource_classes/CUSTOM_MAGIC", "1.7", nil)
	a.must(201, "PUT", "/traits/CUSTOM_GOLD", "1.6", nil)
	var all []string
	n := 0
	newUUID := func() string { n++; return fmt.Sprintf("%08x-1111-4000-8000-%012d", r.Uint32(), n) }
	update := func(u string, f func(p *etcdschema.Provider)) {
		if err := a.s.UpdateProvider(ctx, u, func(p *etcdschema.Provider) error { f(p); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	for range 12 { // compute trees: a root, sometimes NUMA children with PFs
		root := newUUID()
		mkProvider(t, a.s, root, "", map[string]etcdschema.Inventory{"VCPU": inv(32), "MEMORY_MB": inv(65536), "DISK_GB": inv(500)})
		all = append(all, root)
		for range r.Intn(3) {
			numa := newUUID()
			mkProvider(t, a.s, numa, root, map[string]etcdschema.Inventory{"VCPU": inv(16), "MEMORY_MB": inv(32768)})
			all = append(all, numa)
			if r.Intn(2) == 0 {
				pf := newUUID()
				mkProvider(t, a.s, pf, numa, map[string]etcdschema.Inventory{"SRIOV_NET_VF": inv(8), "CUSTOM_MAGIC": inv(4)})
				all = append(all, pf)
			}
		}
		update(root, func(p *etcdschema.Provider) {
			if r.Intn(2) == 0 {
				p.Aggregates = []string{agg}
			}
			for _, tr := range []string{"HW_CPU_X86_AVX2", "CUSTOM_GOLD", "COMPUTE_STATUS_DISABLED"} {
				if r.Intn(3) == 0 {
					p.Traits = append(p.Traits, tr)
				}
			}
		})
	}
	for range 2 { // shared disk pools
		sh := newUUID()
		mkProvider(t, a.s, sh, "", map[string]etcdschema.Inventory{"DISK_GB": inv(10000), "IPV4_ADDRESS": inv(64)})
		all = append(all, sh)
		update(sh, func(p *etcdschema.Provider) {
			p.Aggregates = []string{agg}
			p.Traits = append(p.Traits, "MISC_SHARES_VIA_AGGREGATE")
		})
	}
	queries := []string{
		"resources=VCPU:1,MEMORY_MB:512",
		"resources=VCPU:1,MEMORY_MB:512,DISK_GB:10&limit=5",
		"resources=VCPU:2&required=HW_CPU_X86_AVX2",
		"resources=VCPU:1&required=!COMPUTE_STATUS_DISABLED&limit=1",
		"resources=DISK_GB:20&member_of=" + agg,
		"resources=VCPU:1,DISK_GB:20,IPV4_ADDRESS:1",
		"resources1=VCPU:1&resources2=SRIOV_NET_VF:1&group_policy=none",
		"resources1=VCPU:1&resources2=SRIOV_NET_VF:1&group_policy=isolate",
		"resources=MEMORY_MB:1024&resources1=CUSTOM_MAGIC:1&resources2=SRIOV_NET_VF:2&group_policy=none&limit=7",
		"resources_A=VCPU:1&resources_B=SRIOV_NET_VF:1&group_policy=none&same_subtree=_A,_B",
		"resources=VCPU:1&required=in:CUSTOM_GOLD,HW_CPU_X86_AVX2",
		"resources=VCPU:1&root_required=!COMPUTE_STATUS_DISABLED",
		"resources=VCPU:100",
		"resources1=VCPU:1&resources2=VCPU:1&group_policy=none",
		"resources=VCPU:1,MEMORY_MB:64&resources1=VCPU:1,DISK_GB:5&resources2=MEMORY_MB:128&group_policy=none&limit=50",
	}
	compared, nonEmpty := 0, 0
	for round := range 4 {
		for _, q := range queries {
			for mv := 10; mv <= maxMinor; mv++ {
				path := "/allocation_candidates?" + q
				c := &reqCtx{r: httptest.NewRequest("GET", path, nil), mv: mv}
				cq, err := parser.parseCandidateQuery(c)
				if err != nil {
					continue // a query this microversion does not take
				}
				got := a.call("GET", path, fmt.Sprintf("1.%d", mv), nil)
				if got.status != 200 {
					t.Fatalf("round %d 1.%d %s: %d %s", round, mv, q, got.status, got.raw)
				}
				cands, err := a.s.AllocationCandidates(ctx, cq)
				if err != nil {
					t.Fatal(err)
				}
				requested := map[string]bool{}
				for _, g := range cq.Groups {
					for rc := range g.Resources {
						requested[rc] = true
					}
				}
				if want := referenceCandidatesJSON(mv, requested, cands); !bytes.Equal([]byte(got.raw), want) {
					t.Fatalf("round %d 1.%d %s: %s", round, mv, q, diffAt([]byte(got.raw), want))
				}
				compared++
				if len(cands.AllocationRequests) > 1 {
					nonEmpty++
				}
			}
		}
		// Move the cloud: claim on some providers, change traits and
		// inventories of others.
		for i, u := range all {
			switch r.Intn(4) {
			case 0:
				consumer := fmt.Sprintf("c0000000-0000-4000-8000-%04d%08d", round, i)
				w := placement.AllocationWrite{ProjectID: "p", UserID: "u", Allocations: map[string]placement.ProviderAllocation{}}
				got := a.must(200, "GET", "/resource_providers/"+u+"/inventories", "1.39", nil)
				invs, _ := got.body["inventories"].(map[string]any)
				for rc := range invs {
					w.Allocations[u] = placement.ProviderAllocation{Resources: map[string]int64{rc: 1}}
					break
				}
				if len(w.Allocations) > 0 {
					if err := a.s.PutAllocations(ctx, consumer, w); err != nil {
						t.Fatal(err)
					}
				}
			case 1:
				update(u, func(p *etcdschema.Provider) {
					if len(p.Traits) > 0 && !strings.HasPrefix(p.Traits[0], "MISC") {
						p.Traits = p.Traits[1:]
					} else {
						p.Traits = append(p.Traits, "CUSTOM_GOLD")
					}
				})
			}
		}
		if err := a.s.SyncIndex(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Most queries must have been taken and answered with several
	// candidates, or this compared little.
	if compared < 800 || nonEmpty < compared/2 {
		t.Errorf("compared %d answers, %d with more than one candidate", compared, nonEmpty)
	}
	t.Logf("compared %d answers, %d with more than one candidate", compared, nonEmpty)
}
