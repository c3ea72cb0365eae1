package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/testwait"
)

// The OpenStack CLI e2e: Debian's python3-openstackclient (6.0.0) with
// python3-osc-placement (4.0.0) drives Berth's Placement API, and the test
// checks what each command prints, as an operator would read it.
//
// Set BERTH_E2E_PLACEMENT_URL to run TestOpenStackCLIPlacement against an
// already running, fresh Placement instead of starting berth (for example
// the reference OpenStack Placement of ../shared/reference, in noauth2):
// every expectation here is meant to hold for the original too.

// TestOpenStackCLIPlacement drives Berth's Placement API (noauth, as `berth
// dev` serves it) with the real openstack CLI through a provider tree,
// inventories, traits, aggregates, allocations, candidates and usages,
// including the errors an operator sees.
func TestOpenStackCLIPlacement(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	skipWithoutOSC(t)
	t.Parallel()
	endpoint := os.Getenv("BERTH_E2E_PLACEMENT_URL")
	if endpoint == "" {
		endpoint = startBerthPlacement(t, "")
	}
	o := newOSC(t, endpoint, "admin")

	var (
		R  = uuid.NewString() // root1: VCPU, MEMORY_MB, DISK_GB; CUSTOM_FAST
		C  = uuid.NewString() // child1 under root1: CUSTOM_GPU
		S  string             // root2 (uuid chosen by the server): CUSTOM_SLOW
		A1 = uuid.NewString()
		A2 = uuid.NewString()
		X1 = uuid.NewString() // consumers
		X2 = uuid.NewString()
		PJ = uuid.NewString()
		US = uuid.NewString()
	)
	generation := func(t *testing.T, rp string) int {
		t.Helper()
		var p oscProvider
		o.json(t, &p, "resource", "provider", "show", rp)
		return p.Generation
	}

	t.Run("resource provider create, list, show, set", func(t *testing.T) {
		var p oscProvider
		o.json(t, &p, "resource", "provider", "create", "root1", "--uuid", R)
		if p.UUID != R || p.Name != "root1" || p.Generation != 0 || p.Root != R || p.Parent != nil {
			t.Errorf("create root1 printed %+v", p)
		}
		o.json(t, &p, "resource", "provider", "create", "child1", "--uuid", C, "--parent-provider", R)
		if p.UUID != C || p.Root != R || p.Parent == nil || *p.Parent != R {
			t.Errorf("create child1 printed %+v, want parent and root %s", p, R)
		}
		// Without --uuid the server picks one; the default table shows it.
		f := fields(t, o.ok(t, "resource", "provider", "create", "root2"))
		S = f["uuid"]
		if _, err := uuid.Parse(S); err != nil || f["name"] != "root2" || f["generation"] != "0" ||
			f["root_provider_uuid"] != S || f["parent_provider_uuid"] != "None" {
			t.Fatalf("create root2 printed %v", f)
		}
		o.failsWith(t, "Conflicting resource provider name: root1 already exists. (HTTP 409)",
			"resource", "provider", "create", "root1")

		var all []oscProvider
		o.json(t, &all, "resource", "provider", "list")
		var got []string
		for _, p := range all {
			got = append(got, p.Name)
		}
		sameSet(t, "provider list", got, []string{"root1", "child1", "root2"})
		sameSet(t, "list --in-tree child1", lines(o.ok(t, "resource", "provider", "list", "--in-tree", C, "-f", "value", "-c", "name")),
			[]string{"root1", "child1"})
		sameSet(t, "list --name root2", lines(o.ok(t, "resource", "provider", "list", "--name", "root2", "-f", "value", "-c", "uuid")),
			[]string{S})

		o.json(t, &p, "resource", "provider", "show", C)
		if p.Name != "child1" || p.Parent == nil || *p.Parent != R {
			t.Errorf("show child1 printed %+v", p)
		}
		missing := uuid.NewString()
		o.failsWith(t, "No resource provider with uuid "+missing+" found (HTTP 404)",
			"resource", "provider", "show", missing)

		o.json(t, &p, "resource", "provider", "set", S, "--name", "root2b")
		if p.UUID != S || p.Name != "root2b" {
			t.Errorf("set --name printed %+v", p)
		}
		if f := fields(t, o.ok(t, "resource", "provider", "show", S)); f["name"] != "root2b" {
			t.Errorf("show after rename printed %v", f)
		}
		o.failsWith(t, "Conflicting resource provider root1 already exists. (HTTP 409)",
			"resource", "provider", "set", S, "--name", "root1")
	})

	t.Run("resource class create, list, show", func(t *testing.T) {
		if out := o.ok(t, "resource", "class", "create", "CUSTOM_GPU"); strings.TrimSpace(out) != "" {
			t.Errorf("resource class create printed %q, want nothing", out)
		}
		o.failsWith(t, "Conflicting resource class already exists: CUSTOM_GPU (HTTP 409)",
			"resource", "class", "create", "CUSTOM_GPU")
		classes := lines(o.ok(t, "resource", "class", "list", "-f", "value"))
		for _, want := range []string{"VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_GPU"} {
			if !contains(classes, want) {
				t.Errorf("resource class list lacks %s: %v", want, classes)
			}
		}
		var rc struct{ Name string }
		o.json(t, &rc, "resource", "class", "show", "CUSTOM_GPU")
		if rc.Name != "CUSTOM_GPU" {
			t.Errorf("resource class show printed %+v", rc)
		}
		// set (1.7) creates or keeps a class: idempotent.
		o.ok(t, "resource", "class", "set", "CUSTOM_SCRATCH")
		o.ok(t, "resource", "class", "set", "CUSTOM_SCRATCH")
		o.ok(t, "resource", "class", "delete", "CUSTOM_SCRATCH")
		o.failsWith(t, "No such resource class CUSTOM_SCRATCH. (HTTP 404)", "resource", "class", "show", "CUSTOM_SCRATCH")
	})

	t.Run("inventory set, list, show, class set, delete", func(t *testing.T) {
		var invs []oscInventory
		o.json(t, &invs, "resource", "provider", "inventory", "set", R,
			"--resource", "VCPU=8", "--resource", "MEMORY_MB=4096",
			"--resource", "VCPU:allocation_ratio=2.0", "--resource", "MEMORY_MB:reserved=512")
		m := inventoryByClass(t, invs)
		if len(m) != 2 || m["VCPU"].Total != 8 || m["VCPU"].AllocationRatio != 2 || m["VCPU"].MaxUnit != 2147483647 ||
			m["VCPU"].MinUnit != 1 || m["VCPU"].StepSize != 1 || m["MEMORY_MB"].Reserved != 512 || m["MEMORY_MB"].AllocationRatio != 1 {
			t.Errorf("inventory set printed %+v", invs)
		}
		// --amend keeps what is there.
		o.json(t, &invs, "resource", "provider", "inventory", "set", R, "--amend",
			"--resource", "DISK_GB=100", "--resource", "DISK_GB:max_unit=50")
		m = inventoryByClass(t, invs)
		if len(m) != 3 || m["VCPU"].Total != 8 || m["DISK_GB"].Total != 100 || m["DISK_GB"].MaxUnit != 50 {
			t.Errorf("inventory set --amend printed %+v", invs)
		}
		rows := table(t, o.ok(t, "resource", "provider", "inventory", "list", R))
		sameSet(t, "inventory list classes", names(rows, "resource_class"), []string{"VCPU", "MEMORY_MB", "DISK_GB"})
		for _, r := range rows {
			if r["resource_class"] == "DISK_GB" && (r["total"] != "100" || r["max_unit"] != "50" || r["used"] != "0") {
				t.Errorf("inventory list DISK_GB row = %v", r)
			}
		}
		var inv oscInventory
		o.json(t, &inv, "resource", "provider", "inventory", "show", R, "VCPU")
		if inv.Total != 8 || inv.AllocationRatio != 2 || inv.Used == nil || *inv.Used != 0 {
			t.Errorf("inventory show VCPU printed %+v", inv)
		}
		o.failsWith(t, "No inventory of class CUSTOM_GPU for "+R+" (HTTP 404)",
			"resource", "provider", "inventory", "show", R, "CUSTOM_GPU")

		// A custom class with reserved and allocation ratio, on the child.
		o.json(t, &invs, "resource", "provider", "inventory", "set", C, "--resource", "CUSTOM_GPU=4",
			"--resource", "CUSTOM_GPU:reserved=1", "--resource", "CUSTOM_GPU:allocation_ratio=1.5")
		if m := inventoryByClass(t, invs); m["CUSTOM_GPU"].Total != 4 || m["CUSTOM_GPU"].Reserved != 1 || m["CUSTOM_GPU"].AllocationRatio != 1.5 {
			t.Errorf("inventory set CUSTOM_GPU printed %+v", invs)
		}
		o.ok(t, "resource", "provider", "inventory", "delete", C, "--resource-class", "CUSTOM_GPU")
		o.failsWith(t, "No inventory of class CUSTOM_GPU for "+C+" (HTTP 404)",
			"resource", "provider", "inventory", "show", C, "CUSTOM_GPU")
		o.failsWith(t, "No inventory of class CUSTOM_GPU found for delete: No inventory of class CUSTOM_GPU found for delete (HTTP 404)",
			"resource", "provider", "inventory", "delete", C, "--resource-class", "CUSTOM_GPU")
		// class set updates one class, but only one that exists.
		msg := o.fails(t, "resource", "provider", "inventory", "class", "set", C, "CUSTOM_GPU", "--total", "4")
		if !strings.HasPrefix(msg, "No inventory record with resource class for resource provider "+C+": No inventory of class CUSTOM_GPU found") ||
			!strings.HasSuffix(msg, "(HTTP 400)") {
			t.Errorf("class set on a missing class printed %q", msg)
		}
		o.ok(t, "resource", "provider", "inventory", "set", C, "--resource", "CUSTOM_GPU=2")
		o.json(t, &inv, "resource", "provider", "inventory", "class", "set", C, "CUSTOM_GPU",
			"--total", "4", "--reserved", "1", "--allocation_ratio", "1.5")
		if inv.Total != 4 || inv.Reserved != 1 || inv.AllocationRatio != 1.5 {
			t.Errorf("inventory class set printed %+v", inv)
		}
		o.failsWith(t, "Unknown resource class in inventory for resource provider "+R+": No such resource class CUSTOM_NOPE. (HTTP 400)",
			"resource", "provider", "inventory", "set", R, "--resource", "VCPU=8", "--resource", "CUSTOM_NOPE=1")

		o.ok(t, "resource", "provider", "inventory", "set", S,
			"--resource", "VCPU=16", "--resource", "MEMORY_MB=8192", "--resource", "DISK_GB=200")
	})

	t.Run("inventory list prints allocation ratios as floats", func(t *testing.T) {
		// Placement's allocation_ratio is a float: its JSON says 2.0 and
		// the CLI's table prints 2.0, not 2.
		rows := table(t, o.ok(t, "resource", "provider", "inventory", "list", R))
		for _, r := range rows {
			if r["resource_class"] == "VCPU" {
				if r["allocation_ratio"] != "2.0" {
					t.Errorf("VCPU allocation_ratio printed %q, want 2.0", r["allocation_ratio"])
				}
			}
		}
	})

	t.Run("trait create, list, provider trait set and list", func(t *testing.T) {
		o.ok(t, "trait", "create", "CUSTOM_FAST")
		o.ok(t, "trait", "create", "CUSTOM_SLOW")
		o.ok(t, "trait", "show", "CUSTOM_FAST")
		o.failsWith(t, "No such trait(s): CUSTOM_NOPE. (HTTP 404)", "trait", "show", "CUSTOM_NOPE")
		var traits []struct{ Name string }
		o.json(t, &traits, "trait", "list", "--name", "startswith:CUSTOM_")
		var got []string
		for _, tr := range traits {
			got = append(got, tr.Name)
		}
		sameSet(t, "trait list startswith:CUSTOM_", got, []string{"CUSTOM_FAST", "CUSTOM_SLOW"})
		if all := lines(o.ok(t, "trait", "list", "-f", "value")); !contains(all, "COMPUTE_STATUS_DISABLED") || !contains(all, "HW_CPU_X86_AVX2") {
			t.Errorf("trait list lacks standard traits (%d listed)", len(all))
		}

		o.json(t, &traits, "resource", "provider", "trait", "set", R, "--trait", "CUSTOM_FAST", "--trait", "HW_CPU_X86_AVX2")
		got = nil
		for _, tr := range traits {
			got = append(got, tr.Name)
		}
		sameSet(t, "trait set printed", got, []string{"CUSTOM_FAST", "HW_CPU_X86_AVX2"})
		o.ok(t, "resource", "provider", "trait", "set", S, "--trait", "CUSTOM_SLOW")
		o.ok(t, "resource", "provider", "trait", "set", C, "--trait", "HW_GPU_API_VULKAN")
		sameSet(t, "provider trait list (table)", names(table(t, o.ok(t, "resource", "provider", "trait", "list", R)), "name"),
			[]string{"CUSTOM_FAST", "HW_CPU_X86_AVX2"})
		sameSet(t, "trait list --associated", lines(o.ok(t, "trait", "list", "--associated", "-f", "value")),
			[]string{"CUSTOM_FAST", "CUSTOM_SLOW", "HW_CPU_X86_AVX2", "HW_GPU_API_VULKAN"})
		o.failsWith(t, "No such trait CUSTOM_NOPE (HTTP 400)", "resource", "provider", "trait", "set", R, "--trait", "CUSTOM_NOPE")
	})

	t.Run("aggregate list of a provider without aggregates", func(t *testing.T) {
		out, errOut, err := o.runAt(t, oscPlacementVersion, "resource", "provider", "aggregate", "list", R, "-f", "json")
		if err != nil || strings.TrimSpace(out) != "[]" {
			t.Errorf("aggregate list printed %q, %q (err %v), want []", out, errOut, err)
		}
	})

	t.Run("aggregate set and list, member_of", func(t *testing.T) {
		gen := generation(t, R)
		var aggs []struct{ UUID string }
		o.json(t, &aggs, "resource", "provider", "aggregate", "set", R, "--aggregate", A1, "--generation", fmt.Sprint(gen))
		if len(aggs) != 1 || aggs[0].UUID != A1 {
			t.Errorf("aggregate set printed %+v", aggs)
		}
		// The generation moved on: the old one is refused.
		o.failsWith(t, "Resource provider's generation already changed. Please update the generation and try again. (HTTP 409)",
			"resource", "provider", "aggregate", "set", R, "--aggregate", A1, "--aggregate", A2, "--generation", fmt.Sprint(gen))
		if g := generation(t, R); g != gen+1 {
			t.Errorf("generation after aggregate set = %d, want %d", g, gen+1)
		}
		o.json(t, &aggs, "resource", "provider", "aggregate", "set", R, "--aggregate", A1, "--aggregate", A2, "--generation", fmt.Sprint(gen+1))
		o.ok(t, "resource", "provider", "aggregate", "set", S, "--aggregate", A2, "--generation", fmt.Sprint(generation(t, S)))
		sameSet(t, "aggregate list (table)", names(table(t, o.ok(t, "resource", "provider", "aggregate", "list", R)), "uuid"), []string{A1, A2})

		sameSet(t, "list --member-of A1", lines(o.ok(t, "resource", "provider", "list", "--member-of", A1, "-f", "value", "-c", "name")), []string{"root1"})
		sameSet(t, "list --member-of A2", lines(o.ok(t, "resource", "provider", "list", "--member-of", A2, "-f", "value", "-c", "name")), []string{"root1", "root2b"})
		sameSet(t, "list --resource MEMORY_MB=5000", lines(o.ok(t, "resource", "provider", "list", "--resource", "MEMORY_MB=5000", "-f", "value", "-c", "name")), []string{"root2b"})
		sameSet(t, "list --required CUSTOM_FAST", lines(o.ok(t, "resource", "provider", "list", "--required", "CUSTOM_FAST", "-f", "value", "-c", "name")), []string{"root1"})
		sameSet(t, "list --forbidden CUSTOM_FAST", lines(o.ok(t, "resource", "provider", "list", "--forbidden", "CUSTOM_FAST", "-f", "value", "-c", "name")), []string{"child1", "root2b"})
	})

	t.Run("allocation set, show; usages", func(t *testing.T) {
		var allocs []oscAllocation
		o.json(t, &allocs, "resource", "provider", "allocation", "set", X1,
			"--allocation", "rp="+R+",VCPU=2", "--allocation", "rp="+R+",MEMORY_MB=1024", "--allocation", "rp="+C+",CUSTOM_GPU=1",
			"--project-id", PJ, "--user-id", US, "--consumer-type", "INSTANCE")
		checkX1 := func(what string, allocs []oscAllocation) {
			t.Helper()
			by := map[string]oscAllocation{}
			for _, a := range allocs {
				by[a.ResourceProvider] = a
				if a.ProjectID != PJ || a.UserID != US || a.ConsumerType != "INSTANCE" {
					t.Errorf("%s: row %+v, want project %s user %s type INSTANCE", what, a, PJ, US)
				}
			}
			if len(by) != 2 || !reflect.DeepEqual(by[R].Resources, map[string]int{"VCPU": 2, "MEMORY_MB": 1024}) ||
				!reflect.DeepEqual(by[C].Resources, map[string]int{"CUSTOM_GPU": 1}) {
				t.Errorf("%s printed %+v", what, allocs)
			}
		}
		checkX1("allocation set", allocs)
		o.json(t, &allocs, "resource", "provider", "allocation", "show", X1)
		checkX1("allocation show", allocs)
		rows := table(t, o.ok(t, "resource", "provider", "allocation", "show", X1))
		if len(rows) != 2 || rows[0]["consumer_type"] != "INSTANCE" || rows[0]["project_id"] != PJ {
			t.Errorf("allocation show (table) = %v", rows)
		}
		if g := consumerGeneration(t, endpoint, "admin", X1); g == nil || *g != 1 {
			t.Errorf("consumer generation after the first allocation set = %v, want 1", g)
		}

		o.failsWith(t, "Unable to allocate inventory: Unable to create allocation for 'VCPU' on resource provider '"+S+"'. The requested amount would exceed the capacity. (HTTP 409)",
			"resource", "provider", "allocation", "set", X2, "--allocation", "rp="+S+",VCPU=100",
			"--project-id", PJ, "--user-id", US, "--consumer-type", "INSTANCE")
		o.json(t, &allocs, "resource", "provider", "allocation", "set", X2,
			"--allocation", "rp="+S+",VCPU=4", "--allocation", "rp="+S+",MEMORY_MB=2048",
			"--project-id", PJ, "--user-id", US, "--consumer-type", "MIGRATION")
		if len(allocs) != 1 || allocs[0].ConsumerType != "MIGRATION" || allocs[0].Resources["VCPU"] != 4 {
			t.Errorf("allocation set X2 printed %+v", allocs)
		}

		var usages []struct {
			ResourceClass string `json:"resource_class"`
			Usage         int    `json:"usage"`
		}
		o.json(t, &usages, "resource", "provider", "usage", "show", R)
		got := map[string]int{}
		for _, u := range usages {
			got[u.ResourceClass] = u.Usage
		}
		if diff := cmp.Diff(map[string]int{"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 0}, got); diff != "" {
			t.Errorf("provider usage show printed (-want +got):\n%s", diff)
		}
		urows := table(t, o.ok(t, "resource", "provider", "usage", "show", S))
		gotS := map[string]string{}
		for _, r := range urows {
			gotS[r["resource_class"]] = r["usage"]
		}
		if diff := cmp.Diff(map[string]string{"VCPU": "4", "MEMORY_MB": "2048", "DISK_GB": "0"}, gotS); diff != "" {
			t.Errorf("provider usage show (table) (-want +got):\n%s", diff)
		}

		// Project usages: by consumer type at 1.38+, flat before.
		var byType []struct {
			ResourceClass string         `json:"resource_class"` // the CLI's column name for the consumer type
			Usage         map[string]int `json:"usage"`
		}
		o.json(t, &byType, "resource", "usage", "show", PJ)
		gotT := map[string]map[string]int{}
		for _, u := range byType {
			gotT[u.ResourceClass] = u.Usage
		}
		wantT := map[string]map[string]int{
			"INSTANCE":  {"VCPU": 2, "MEMORY_MB": 1024, "CUSTOM_GPU": 1, "consumer_count": 1},
			"MIGRATION": {"VCPU": 4, "MEMORY_MB": 2048, "consumer_count": 1},
		}
		if diff := cmp.Diff(wantT, gotT); diff != "" {
			t.Errorf("resource usage show printed (-want +got):\n%s", diff)
		}
		o.json(t, &byType, "resource", "usage", "show", PJ, "--user-id", uuid.NewString())
		if len(byType) != 0 {
			t.Errorf("usage of another user printed %v, want []", byType)
		}
		out, errOut, err := o.runAt(t, "1.28", "resource", "usage", "show", PJ)
		if err != nil {
			t.Fatalf("usage show at 1.28: %v\n%s", err, errOut)
		}
		flat := map[string]string{}
		for _, r := range table(t, out) {
			flat[r["resource_class"]] = r["usage"]
		}
		if diff := cmp.Diff(map[string]string{"VCPU": "6", "MEMORY_MB": "3072", "CUSTOM_GPU": "1"}, flat); diff != "" {
			t.Errorf("usage show at 1.28 (-want +got):\n%s", diff)
		}

		var p oscProvider
		o.json(t, &p, "resource", "provider", "show", R, "--allocations")
		var a struct {
			Resources          map[string]int `json:"resources"`
			ConsumerGeneration int            `json:"consumer_generation"`
		}
		if err := json.Unmarshal(p.Allocations[X1], &a); err != nil || len(p.Allocations) != 1 ||
			!reflect.DeepEqual(a.Resources, map[string]int{"VCPU": 2, "MEMORY_MB": 1024}) || a.ConsumerGeneration != 1 {
			t.Errorf("provider show --allocations printed %+v (%v)", p, err)
		}

		// What is allocated cannot go.
		msg := o.fails(t, "resource", "provider", "inventory", "delete", R, "--resource-class", "VCPU")
		if !strings.Contains(msg, "Inventory for 'VCPU' on resource provider '"+R+"' in use.") || !strings.HasSuffix(msg, "(HTTP 409)") {
			t.Errorf("inventory delete in use printed %q", msg)
		}
		o.failsWith(t, "Unable to delete parent resource provider "+R+": It has child resource providers. (HTTP 409)",
			"resource", "provider", "delete", R)
	})

	t.Run("inventory delete in use prints Placement's message", func(t *testing.T) {
		msg := o.fails(t, "resource", "provider", "inventory", "delete", R, "--resource-class", "VCPU")
		if want := "Unable to delete inventory of class VCPU: Inventory for 'VCPU' on resource provider '" + R + "' in use. (HTTP 409)"; msg != want {
			t.Errorf("printed %q, want %q", msg, want)
		}
	})

	t.Run("allocation candidate list", func(t *testing.T) {
		cands := func(args ...string) []oscCandidate {
			t.Helper()
			var cs []oscCandidate
			o.json(t, &cs, append([]string{"allocation", "candidate", "list"}, args...)...)
			return cs
		}
		providers := func(cs []oscCandidate) []string {
			var out []string
			for _, c := range cs {
				out = append(out, c.Provider)
			}
			return out
		}
		cs := cands("--resource", "VCPU=2", "--resource", "MEMORY_MB=1024")
		sameSet(t, "candidates for VCPU=2,MEMORY_MB=1024", providers(cs), []string{R, S})
		for _, c := range cs {
			if !reflect.DeepEqual(kvList(c.Allocation), map[string]string{"VCPU": "2", "MEMORY_MB": "1024"}) {
				t.Errorf("candidate allocation %q", c.Allocation)
			}
			var want map[string]string
			var traits []string
			switch c.Provider {
			case R: // VCPU 8 x 2.0; MEMORY_MB 4096 - 512 reserved
				want, traits = map[string]string{"VCPU": "2/16", "MEMORY_MB": "1024/3584", "DISK_GB": "0/100"}, []string{"CUSTOM_FAST", "HW_CPU_X86_AVX2"}
			case S:
				want, traits = map[string]string{"VCPU": "4/16", "MEMORY_MB": "2048/8192", "DISK_GB": "0/200"}, []string{"CUSTOM_SLOW"}
			}
			if diff := cmp.Diff(want, kvList(c.UsedCapacity)); diff != "" {
				t.Errorf("candidate %s used/capacity %q (-want +got):\n%s", c.Provider, c.UsedCapacity, diff)
			}
			sameSet(t, "candidate traits", strings.Split(c.Traits, ","), traits)
		}
		rows := table(t, o.ok(t, "allocation", "candidate", "list", "--resource", "VCPU=2", "--required", "CUSTOM_FAST"))
		if len(rows) != 1 || rows[0]["resource provider"] != R || rows[0]["#"] != "1" || rows[0]["allocation"] != "VCPU=2" {
			t.Errorf("candidates --required CUSTOM_FAST (table) = %v", rows)
		}
		sameSet(t, "--required !CUSTOM_FAST", providers(cands("--resource", "VCPU=2", "--required", "!CUSTOM_FAST")), []string{S})
		sameSet(t, "--forbidden CUSTOM_SLOW", providers(cands("--resource", "VCPU=2", "--forbidden", "CUSTOM_SLOW")), []string{R})
		sameSet(t, "--required any-of", providers(cands("--resource", "VCPU=2", "--required", "CUSTOM_FAST,CUSTOM_SLOW")), []string{R, S})
		sameSet(t, "--member-of A1", providers(cands("--resource", "VCPU=2", "--member-of", A1)), []string{R})
		sameSet(t, "--member-of A1,A2", providers(cands("--resource", "VCPU=2", "--member-of", A1+","+A2)), []string{R, S})
		if cs := cands("--resource", "VCPU=2", "--limit", "1"); len(cs) != 1 {
			t.Errorf("--limit 1 printed %d candidates", len(cs))
		}
		if cs := cands("--resource", "VCPU=1000"); len(cs) != 0 {
			t.Errorf("VCPU=1000 printed %+v, want none", cs)
		}
		// Granular groups: VCPU from a root, the GPU from its child.
		cs = cands("--group", "1", "--resource", "VCPU=2", "--group", "2", "--resource", "CUSTOM_GPU=1", "--group-policy", "isolate")
		if len(cs) != 2 || cs[0].N != 1 || cs[1].N != 1 {
			t.Fatalf("grouped candidates printed %+v, want candidate 1 on two providers", cs)
		}
		sameSet(t, "grouped candidate providers", providers(cs), []string{R, C})
		for _, c := range cs {
			if c.Provider == C && (c.Allocation != "CUSTOM_GPU=1" || c.UsedCapacity != "CUSTOM_GPU=1/4" || c.Traits != "HW_GPU_API_VULKAN") {
				t.Errorf("GPU part of the candidate = %+v", c)
			}
		}
	})

	t.Run("refusals an operator reads", func(t *testing.T) {
		X9, missing := uuid.NewString(), uuid.NewString()
		set := func(allocs ...string) []string {
			args := []string{"resource", "provider", "allocation", "set", X9}
			for _, a := range allocs {
				args = append(args, "--allocation", a)
			}
			return append(args, "--project-id", PJ, "--user-id", US, "--consumer-type", "INSTANCE")
		}
		o.failsWith(t, "Unable to allocate inventory: Inventory for 'CUSTOM_GPU' on resource provider '"+R+"' invalid. (HTTP 409)",
			set("rp="+R+",VCPU=1", "rp="+R+",CUSTOM_GPU=1")...)
		o.failsWith(t, "Allocation for resource provider '"+missing+"' that does not exist. (HTTP 400)",
			set("rp="+missing+",VCPU=1")...)
		o.failsWith(t, "Invalid resource class in resources parameter: No such resource class CUSTOM_NOPE. (HTTP 400)",
			"allocation", "candidate", "list", "--resource", "CUSTOM_NOPE=1")
		o.failsWith(t, "Invalid query string parameters: Expected 'member_of' parameter to contain valid UUID(s). Got: not-a-uuid (HTTP 400)",
			"allocation", "candidate", "list", "--resource", "VCPU=1", "--member-of", "not-a-uuid")
	})

	t.Run("refusal for a provider with none of the classes names all of them", func(t *testing.T) {
		// Placement names every class of the request when a provider has
		// none of those asked of it.
		msg := o.fails(t, "resource", "provider", "allocation", "set", uuid.NewString(),
			"--allocation", "rp="+R+",VCPU=1", "--allocation", "rp="+C+",MEMORY_MB=1",
			"--project-id", PJ, "--user-id", US, "--consumer-type", "INSTANCE")
		if want := "Unable to allocate inventory: Inventory for 'VCPU, MEMORY_MB' on resource provider '" + C + "' invalid. (HTTP 409)"; msg != want {
			t.Errorf("printed %q, want %q", msg, want)
		}
	})

	t.Run("candidates with an unknown required trait", func(t *testing.T) {
		msg := o.fails(t, "allocation", "candidate", "list", "--resource", "VCPU=1", "--required", "CUSTOM_NOPE")
		if want := "No such trait(s): CUSTOM_NOPE. (HTTP 400)"; msg != want {
			t.Errorf("printed %q, want %q", msg, want)
		}
	})

	t.Run("allocation candidate of a provider without traits", func(t *testing.T) {
		A3 := uuid.NewString()
		var p oscProvider
		o.json(t, &p, "resource", "provider", "create", "bare")
		o.ok(t, "resource", "provider", "inventory", "set", p.UUID, "--resource", "VCPU=4")
		o.ok(t, "resource", "provider", "aggregate", "set", p.UUID, "--aggregate", A3, "--generation", "1")
		out, errOut, err := o.runAt(t, oscPlacementVersion, "allocation", "candidate", "list", "--resource", "VCPU=1", "--member-of", A3, "-f", "json")
		var cs []oscCandidate
		if err != nil || json.Unmarshal([]byte(out), &cs) != nil || len(cs) != 1 || cs[0].Provider != p.UUID || cs[0].Traits != "" {
			t.Errorf("printed %q, %q (err %v)", out, errOut, err)
		}
	})

	t.Run("consumer generation advances with each change", func(t *testing.T) {
		// At 1.28+ the CLI reads the consumer's generation and sends it back.
		o.ok(t, "resource", "provider", "allocation", "set", X1,
			"--allocation", "rp="+R+",VCPU=3", "--allocation", "rp="+R+",MEMORY_MB=1024", "--allocation", "rp="+C+",CUSTOM_GPU=1",
			"--project-id", PJ, "--user-id", US, "--consumer-type", "INSTANCE")
		if g := consumerGeneration(t, endpoint, "admin", X1); g == nil || *g != 2 {
			t.Errorf("consumer generation after the second set = %v, want 2", g)
		}
	})

	t.Run("allocation unset and delete", func(t *testing.T) {
		var allocs []oscAllocation
		o.json(t, &allocs, "resource", "provider", "allocation", "unset", X1, "--provider", C)
		if len(allocs) != 1 || allocs[0].ResourceProvider != R || !reflect.DeepEqual(allocs[0].Resources, map[string]int{"VCPU": 3, "MEMORY_MB": 1024}) {
			t.Errorf("unset --provider printed %+v", allocs)
		}
		o.json(t, &allocs, "resource", "provider", "allocation", "unset", X1, "--resource-class", "MEMORY_MB")
		if len(allocs) != 1 || !reflect.DeepEqual(allocs[0].Resources, map[string]int{"VCPU": 3}) {
			t.Errorf("unset --resource-class printed %+v", allocs)
		}
		if g := consumerGeneration(t, endpoint, "admin", X1); g == nil || *g != 4 {
			t.Errorf("consumer generation after two unsets = %v, want 4", g)
		}
		o.ok(t, "resource", "provider", "allocation", "unset", X1)
		o.json(t, &allocs, "resource", "provider", "allocation", "show", X1)
		if len(allocs) != 0 {
			t.Errorf("show after unset printed %+v", allocs)
		}
		if out := o.ok(t, "resource", "provider", "allocation", "delete", X2); strings.TrimSpace(out) != "" {
			t.Errorf("allocation delete printed %q", out)
		}
		o.json(t, &allocs, "resource", "provider", "allocation", "show", X2)
		if len(allocs) != 0 {
			t.Errorf("show after delete printed %+v", allocs)
		}
		o.failsWith(t, "No allocations for consumer '"+X2+"' (HTTP 404)", "resource", "provider", "allocation", "delete", X2)
		var usage []json.RawMessage
		o.json(t, &usage, "resource", "usage", "show", PJ)
		if len(usage) != 0 {
			t.Errorf("project usage after every allocation went printed %s", usage)
		}
	})

	t.Run("deleting allocations leaves provider generations alone", func(t *testing.T) {
		// Placement bumps a provider's generation when allocations are
		// written to it (PUT, POST), not on DELETE /allocations/{consumer}.
		X3 := uuid.NewString()
		o.ok(t, "resource", "provider", "allocation", "set", X3, "--allocation", "rp="+S+",VCPU=1",
			"--project-id", PJ, "--user-id", US, "--consumer-type", "INSTANCE")
		before := generation(t, S)
		o.ok(t, "resource", "provider", "allocation", "delete", X3)
		if after := generation(t, S); after != before {
			t.Errorf("generation %d -> %d after allocation delete, want unchanged", before, after)
		}
	})

	t.Run("trait delete and provider trait delete", func(t *testing.T) {
		o.failsWith(t, "The trait CUSTOM_SLOW is in use by a resource provider. (HTTP 409)", "trait", "delete", "CUSTOM_SLOW")
		if out := o.ok(t, "resource", "provider", "trait", "delete", S); strings.TrimSpace(out) != "" {
			t.Errorf("provider trait delete printed %q", out)
		}
		o.ok(t, "trait", "delete", "CUSTOM_SLOW")
		o.failsWith(t, "No such trait(s): CUSTOM_SLOW. (HTTP 404)", "trait", "show", "CUSTOM_SLOW")
		out, errOut, err := o.runAt(t, oscPlacementVersion, "resource", "provider", "trait", "list", S, "-f", "json")
		if err != nil || strings.TrimSpace(out) != "[]" {
			t.Errorf("trait list of a provider without traits printed %q, %q (err %v), want []", out, errOut, err)
		}
	})

	t.Run("resource provider and class delete", func(t *testing.T) {
		o.failsWith(t, "Error in delete resource class: Cannot delete resource class CUSTOM_GPU. Class is in use in inventory. (HTTP 409)",
			"resource", "class", "delete", "CUSTOM_GPU")
		o.ok(t, "resource", "provider", "delete", C)
		o.ok(t, "resource", "provider", "delete", R)
		o.failsWith(t, "No resource provider with uuid "+R+" found for delete (HTTP 404)", "resource", "provider", "delete", R)
		o.ok(t, "resource", "class", "delete", "CUSTOM_GPU")
		sameSet(t, "providers left", lines(o.ok(t, "resource", "provider", "list", "-f", "value", "-c", "name")), []string{"root2b", "bare"})
	})

	t.Run("noauth: a user without the admin role is refused", func(t *testing.T) {
		// noauth2: "user:project" is that user in that project, with no
		// role (the CLI cannot send X-Roles), so the legacy policy refuses.
		user := newOSC(t, endpoint, "alice:"+PJ)
		user.failsWith(t, "Policy does not allow placement:resource_providers:list to be performed. (HTTP 403)",
			"resource", "provider", "list")
		user.failsWith(t, "Policy does not allow placement:usages to be performed. (HTTP 403)", "resource", "usage", "show", PJ)
	})
}

// TestOpenStackCLIPlacementTokens runs `berth dev -config` with auth =
// "tokens": the configured tokens work with the CLI as their roles allow,
// any other token is refused, and what a simulated host reports and a
// server build claims shows through the CLI as the operator expects.
func TestOpenStackCLIPlacementTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	skipWithoutOSC(t)
	t.Parallel()
	dir := t.TempDir()
	cfg := writeFile(t, dir, "dev.hcl", `
placement {
  auth = "tokens"
  token "op-s3cret" {
    roles      = ["admin"]
    project_id = "ops"
    user_id    = "operator"
  }
  token "tenant-s3cret" {
    roles      = ["reader"]
    project_id = "p1"
    user_id    = "alice"
  }
  token "monitor-s3cret" {
    roles        = ["reader"]
    system_scope = "all"
  }
}
`)
	placeAddr := freeAddr(t)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	startProc(t, "dev", "dev", "-config", cfg, "-data-dir", filepath.Join(dir, "etcd"),
		"-etcd", freeAddr(t),
		"-etcd-peer", freeAddr(t),
		"-api", strings.TrimPrefix(apiURL, "http://"),
		"-placement", placeAddr, "-identity", freeAddr(t),
		"-image", freeAddr(t), "-hosts", "1", "-cells", "1")
	endpoint := "http://" + placeAddr
	waitHTTP(t, endpoint+"/")

	op := newOSC(t, endpoint, "op-s3cret")
	// The simulated host's agent registers its provider.
	testwait.Poll(t, 60*time.Second, "compute-1 listed through the CLI", func() (bool, string) {
		out, errOut, err := op.runAt(t, oscPlacementVersion, "resource", "provider", "list", "-f", "value", "-c", "name")
		return err == nil && strings.TrimSpace(out) == "compute-1", out + errOut
	})
	host := strings.TrimSpace(op.ok(t, "resource", "provider", "list", "--name", "compute-1", "-f", "value", "-c", "uuid"))

	// What the agent reported and what a build claims, as the CLI shows it.
	inv := map[string]string{}
	for _, r := range table(t, op.ok(t, "resource", "provider", "inventory", "list", host)) {
		inv[r["resource_class"]] = r["total"]
	}
	if diff := cmp.Diff(map[string]string{"VCPU": "16", "MEMORY_MB": "65536", "DISK_GB": "1000"}, inv); diff != "" {
		t.Errorf("compute-1 inventory totals (-want +got):\n%s", diff)
	}
	usage := func() map[string]string {
		u := map[string]string{}
		for _, r := range table(t, op.ok(t, "resource", "provider", "usage", "show", host)) {
			u[r["resource_class"]] = r["usage"]
		}
		return u
	}
	waitHTTP(t, apiURL+"/healthz")
	if out, err := runCLI(t, apiURL, "server", "create", "--flavor", "m1.small", "--name", "osc", "--wait", "--timeout", "60s"); err != nil || !strings.Contains(out, "ACTIVE") {
		t.Fatalf("server create: %v\n%s", err, out)
	}
	if diff := cmp.Diff(map[string]string{"VCPU": "1", "MEMORY_MB": "2048", "DISK_GB": "20"}, usage()); diff != "" {
		t.Errorf("compute-1 usage with one m1.small (-want +got):\n%s", diff)
	}
	list, err := runCLI(t, apiURL, "server", "list")
	if err != nil {
		t.Fatalf("server list: %v\n%s", err, list)
	}
	var server string
	if ls := strings.Split(list, "\n"); len(ls) > 1 {
		if f := strings.Fields(ls[1]); len(f) > 0 {
			server = f[0]
		}
	}
	var allocs []oscAllocation
	op.json(t, &allocs, "resource", "provider", "allocation", "show", server)
	if len(allocs) != 1 || allocs[0].ResourceProvider != host ||
		!reflect.DeepEqual(allocs[0].Resources, map[string]int{"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}) {
		t.Errorf("allocation show of server %s printed %+v", server, allocs)
	}
	if out, err := runCLI(t, apiURL, "server", "delete", "--wait", "--timeout", "60s", server); err != nil {
		t.Fatalf("server delete: %v\n%s", err, out)
	}
	if diff := cmp.Diff(map[string]string{"VCPU": "0", "MEMORY_MB": "0", "DISK_GB": "0"}, usage()); diff != "" {
		t.Errorf("compute-1 usage after the delete (-want +got):\n%s", diff)
	}

	var p oscProvider
	op.json(t, &p, "resource", "provider", "create", "made-by-operator")
	if p.Name != "made-by-operator" {
		t.Errorf("create printed %+v", p)
	}

	tenant := newOSC(t, endpoint, "tenant-s3cret")
	tenant.failsWith(t, "Policy does not allow placement:resource_providers:list to be performed. (HTTP 403)",
		"resource", "provider", "list")
	tenant.failsWith(t, "Policy does not allow placement:resource_providers:create to be performed. (HTTP 403)",
		"resource", "provider", "create", "made-by-tenant")
	tenant.ok(t, "resource", "usage", "show", "p1")
	tenant.failsWith(t, "Policy does not allow placement:usages to be performed. (HTTP 403)", "resource", "usage", "show", "p2")

	// A system-scoped reader reads everything and changes nothing.
	monitor := newOSC(t, endpoint, "monitor-s3cret")
	sameSet(t, "providers seen by the monitoring token",
		lines(monitor.ok(t, "resource", "provider", "list", "-f", "value", "-c", "name")), []string{"compute-1", "made-by-operator"})
	monitor.failsWith(t, "Policy does not allow placement:resource_providers:delete to be performed. (HTTP 403)",
		"resource", "provider", "delete", p.UUID)

	for _, token := range []string{"wrong", "admin"} {
		t.Run("token "+token+" is refused", func(t *testing.T) {
			o := newOSC(t, endpoint, token)
			msg := o.fails(t, "resource", "provider", "list")
			// The refusal is a 401 from Berth, whatever the CLI makes of it.
			_, debug, _ := o.runAt(t, oscPlacementVersion, "--debug", "resource", "provider", "list")
			if !strings.Contains(debug, "RESP: [401]") {
				t.Fatalf("no 401 in the CLI's --debug output:\n%s", debug)
			}
			// osc-placement reads errors[0].detail of every 4xx body.
			if !strings.Contains(msg, "The request you have made requires authentication.") || !strings.HasSuffix(msg, "(HTTP 401)") {
				t.Errorf("printed %q, want an authentication error ending in (HTTP 401)", msg)
			}
		})
	}
	if p.UUID != "" {
		op.ok(t, "resource", "provider", "delete", p.UUID)
	}
}
