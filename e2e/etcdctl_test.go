package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/dump"
	"github.com/berth-project/berth/internal/testwait"
)

// The names docs/etcd-keys.md's recipes use; the test runs each recipe
// with them replaced by the running cluster's.
const (
	docUUID     = "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11" // an instance (and its consumer)
	docProvider = "5f0a9e4c-1b7d-4a37-9a8e-2e6c1f0d3b21"
	docHost     = "compute-1"
	docCell     = "cell1"
)

// etcdctlBin is Debian's etcdctl (package etcd-client). Without it the
// test skips when this user cannot install it; root can (.ci/run does), so
// for root a missing etcdctl is a failure, not a silent skip.
func etcdctlBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	p, err := exec.LookPath("etcdctl")
	if err == nil {
		return p
	}
	if os.Geteuid() != 0 {
		t.Skip("etcdctl is not installed (Debian package etcd-client) and this user cannot install it")
	}
	t.Fatal("etcdctl is not installed: apt-get install etcd-client (.ci/run installs it)")
	return ""
}

// recipes runs the etcdctl commands docs/etcd-keys.md gives an operator,
// exactly as written there, and fails the test if the test runs a command
// the doc does not give or the doc gives one the test never ran.
type recipes struct {
	t        *testing.T
	bin      string
	endpoint string
	doc      map[string]bool // recipe → run at least once
	// readme are the README's other etcdctl lines (the lab walk-through's,
	// which reach etcd through ETCDCTL_ENDPOINTS): each must at least run.
	readme []string
}

func loadRecipes(t *testing.T, bin, endpoint string) *recipes {
	t.Helper()
	b, err := os.ReadFile("../docs/etcd-keys.md")
	if err != nil {
		t.Fatal(err)
	}
	r := &recipes{t: t, bin: bin, endpoint: endpoint, doc: map[string]bool{}}
	_, section, ok := strings.Cut(string(b), "## Reading it with etcdctl")
	if !ok {
		t.Fatal(`docs/etcd-keys.md has no "## Reading it with etcdctl" section`)
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("docs/etcd-keys.md: no ```sh block of recipes")
	}
	for _, line := range strings.Split(block, "\n") {
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), "$E "); ok {
			cmd, _, _ = strings.Cut(cmd, "#")
			r.doc[strings.Join(strings.Fields(cmd), " ")] = false
		}
	}
	if len(r.doc) < 10 {
		t.Fatalf("docs/etcd-keys.md: only %d recipes found", len(r.doc))
	}
	// The README's etcdctl lines must be recipes of the doc (so this test
	// runs them too), with <id> standing for an instance uuid.
	rd, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const readmeE = "ETCDCTL_API=3 etcdctl --endpoints 127.0.0.1:2379 "
	n := 0
	for _, line := range strings.Split(string(rd), "\n") {
		if cmd, ok := strings.CutPrefix(line, "    etcdctl "); ok {
			cmd, _, _ = strings.Cut(cmd, "#")
			r.readme = append(r.readme, strings.Join(strings.Fields(cmd), " "))
		}
		if cmd, ok := strings.CutPrefix(strings.TrimSpace(line), readmeE); ok {
			n++
			cmd = strings.ReplaceAll(strings.Join(strings.Fields(cmd), " "), "<id>", docUUID)
			if _, ok := r.doc[cmd]; !ok {
				t.Errorf("README.md runs %q, which is not a recipe of docs/etcd-keys.md", cmd)
			}
		}
	}
	if n == 0 {
		t.Errorf("README.md has no %q line", readmeE)
	}
	return r
}

// run runs a recipe of the doc with its example names replaced (pairs of
// old, new) and returns etcdctl's output.
func (r *recipes) run(recipe string, replace ...string) string {
	r.t.Helper()
	if _, ok := r.doc[recipe]; !ok {
		r.t.Fatalf("docs/etcd-keys.md gives no recipe %q", recipe)
	}
	r.doc[recipe] = true
	return r.exec(strings.NewReplacer(replace...).Replace(recipe))
}

// exec runs etcdctl with the cluster's endpoint and the arguments of
// cmdline (no shell quoting: recipes have none).
func (r *recipes) exec(cmdline string) string {
	r.t.Helper()
	cmd := exec.Command(r.bin, append([]string{"--endpoints", r.endpoint}, strings.Fields(cmdline)...)...)
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		r.t.Fatalf("etcdctl %s: %v\n%s%s", cmdline, err, out, stderr)
	}
	return string(out)
}

func (r *recipes) allRun() {
	r.t.Helper()
	for rc, ran := range r.doc {
		if !ran {
			r.t.Errorf("docs/etcd-keys.md recipe %q is not exercised by this test", rc)
		}
	}
}

// ctlLines are etcdctl's output lines without the blank ones --keys-only
// puts between keys.
func ctlLines(out string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

// pairs splits etcdctl's default output (key line, value line) into pairs.
func pairs(t *testing.T, out string) [][2]string {
	t.Helper()
	ls := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(ls) == 1 && ls[0] == "" {
		return nil
	}
	if len(ls)%2 != 0 {
		t.Fatalf("etcdctl output is not key/value pairs:\n%s", out)
	}
	var ps [][2]string
	for i := 0; i < len(ls); i += 2 {
		ps = append(ps, [2]string{ls[i], ls[i+1]})
	}
	return ps
}

// value decodes a --print-value-only output as the value stored at key.
func value(t *testing.T, key, out string, v etcdschema.Versioned) {
	t.Helper()
	if err := etcdschema.Decode(key, []byte(strings.TrimSpace(out)), v); err != nil {
		t.Fatalf("etcdctl value of %s: %v\n%s", key, err, out)
	}
}

// etcdctlJSON is `etcdctl get -w json` output; keys and values are base64.
type etcdctlJSON struct {
	Header struct {
		Revision int64 `json:"revision"`
	} `json:"header"`
	Kvs []struct {
		Key            []byte `json:"key"` // base64 in the JSON: []byte decodes it
		Value          []byte `json:"value"`
		CreateRevision int64  `json:"create_revision"`
		ModRevision    int64  `json:"mod_revision"`
		Lease          int64  `json:"lease"`
	} `json:"kvs"`
	Count int64 `json:"count"`
}

// showFields parses `berth server show` output (one "field value" a line).
func showFields(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 2 {
			m[f[0]] = strings.Join(f[1:], " ")
		}
	}
	return m
}

// TestEtcdctlRecipes runs every etcdctl recipe of docs/etcd-keys.md
// against a running Berth (separate processes: a front server, two
// schedulers with superconductors, cell conductors, five agents) and
// checks what etcdctl shows against what the API says, then checks
// `berth debug dump` the same way. The cluster is driven into each state a
// recipe is for: a build request nobody has taken yet, a retry held by a
// cell conductor, a build on an alternate after a failing host (its
// alternates and attempts), a disabled host and a down one.
func TestEtcdctlRecipes(t *testing.T) {
	bin := etcdctlBin(t)
	c := newCluster(t)
	ctx := context.Background()
	rec := loadRecipes(t, bin, c.etcd.ClientURL())
	defer rec.allRun()

	// conductor-a stops holding the first retry it takes, before casting.
	pause, pauseFile := pauseEnv(t, "cellconductor.before-commit")
	condA := c.startConductor("conductor-a", "cell1", pause)
	c.startServer("front", frontRoles, nil)
	first := c.startAgents(agentSpec{host: "compute-3", memoryMB: 16384}, agentSpec{host: "compute-4", memoryMB: 16384},
		agentSpec{host: "compute-5", memoryMB: 4096})

	// ---- no scheduler yet: a requested server is a build request ----------
	p := c.create("p")
	var br etcdschema.BuildRequest
	value(t, c.keys.BuildRequest(p), rec.run("get /berth/build_requests/"+docUUID+" --print-value-only", docUUID, p), &br)
	if v, err := c.api.GetServer(ctx, p); err != nil || v.Status != "BUILD" || br.InstanceUUID != p || br.Name != v.Name ||
		br.Flavor.Name != v.Flavor.Name || br.Flavor.RAMMB != v.Flavor.RAM {
		t.Fatalf("build request of %s: %+v; the API shows %+v (%v)", p, br, v, err)
	}
	var im etcdschema.InstanceMapping
	value(t, c.keys.InstanceMapping(p), rec.run("get /berth/instance_mappings/"+docUUID+" --print-value-only", docUUID, p), &im)
	if im.InstanceUUID != p || im.Cell != "" {
		t.Fatalf("mapping of the unscheduled %s: %+v, want no cell yet", p, im)
	}

	// ---- two schedulers (each with a superconductor) build p and a ---------
	schedA := c.startServer("sched-a", schedRoles, nil)
	schedB := c.startServer("sched-b", schedRoles, nil)
	if v := c.settle(p); v.Status != "ACTIVE" {
		t.Fatalf("p: %+v", v)
	}
	a := c.create("a")
	if v := c.settle(a); v.Status != "ACTIVE" {
		t.Fatalf("a: %+v", v)
	}
	if out := rec.run("get /berth/build_requests/"+docUUID+" --print-value-only", docUUID, p); out != "" {
		t.Fatalf("the build request of the scheduled %s is still there: %s", p, out)
	}

	// ---- x: compute-1 (most RAM) fails the build, compute-2 (next) takes
	// ten minutes; the retry is held by the paused conductor-a ---------------
	more := c.startAgents(agentSpec{host: "compute-1", memoryMB: 32768, fail: true},
		agentSpec{host: "compute-2", memoryMB: 24576, buildTime: "10m"})
	// compute-2's agent would finish its build before stopping: kill it.
	t.Cleanup(func() { more["compute-2"].kill(t) })
	x := c.create("x")
	if got := waitPaused(t, pauseFile, "cellconductor.before-commit"); got != x {
		t.Fatalf("conductor-a paused on %s, want %s", got, x)
	}
	retryKeys := ctlLines(rec.run("get --prefix /berth/cells/cell1/retries/ --keys-only"))
	if !slices.Equal(retryKeys, []string{c.keys.Retry("cell1", x)}) {
		t.Fatalf("retries of cell1: %v, want x's", retryKeys)
	}
	leases := pairs(t, rec.run("get --prefix /berth/cells/cell1/leases/"))
	var lease etcdschema.Lease
	if len(leases) != 1 || leases[0][0] != c.keys.RetryLease("cell1", x) {
		t.Fatalf("retry leases of cell1: %v, want x's", leases)
	}
	value(t, leases[0][0], leases[0][1], &lease)
	if !strings.HasPrefix(lease.Holder, "conductor-cell1@") || !strings.Contains(lease.Holder, fmt.Sprintf("/%d/", condA.cmd.Process.Pid)) {
		t.Fatalf("x's retry is held by %q, want conductor-a (pid %d)", lease.Holder, condA.cmd.Process.Pid)
	}
	// The dump counts the same held retry.
	held := dumpJSON(t, c, "-etcd", c.etcd.ClientURL())
	if f := held.Summary.InFlight; f.Retries != 1 || f.RetriesLeased != 1 {
		t.Fatalf("dump with conductor-a holding x's retry: in flight %+v", f)
	}
	condA.kill(t)
	c.startConductor("conductor-b", "cell1", nil)
	testwait.Poll(t, 60*time.Second, "x building on compute-2 after its retry", func() (bool, string) {
		v, err := c.api.GetServer(ctx, x)
		if err != nil {
			return false, err.Error()
		}
		r, err := c.cli.Get(ctx, c.keys.Retries("cell1"), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return v.Status == "BUILD" && v.Host == "compute-2" && err == nil && r.Count == 0, fmt.Sprintf("%+v %v", v, err)
	})

	// ---- a disabled host and a down one ------------------------------------
	c.cliOK("service", "disable", "compute-4", "--reason", "maintenance")
	first["compute-5"].kill(t)
	c.waitState("compute-5", "down")

	hosts, err := c.api.ListHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byHost := map[string]api.HostView{}
	for _, h := range hosts {
		byHost[h.Host] = h
	}
	if len(hosts) != 5 || byHost["compute-4"].Status != "disabled" || byHost["compute-5"].State != "down" {
		t.Fatalf("/v1/hosts: %+v", hosts)
	}

	// ---- everything: every key is one etcdschema spells ---------------------
	for _, k := range ctlLines(rec.run("get --prefix /berth/ --keys-only")) {
		if _, err := c.keys.ParseKey(k); err != nil {
			t.Errorf("a running Berth wrote a key etcdschema does not know: %v", err)
		}
	}

	// ---- hosts ----------------------------------------------------------------
	services, alive := map[string]bool{}, map[string]bool{}
	for _, k := range ctlLines(rec.run("get --prefix /berth/hosts/ --keys-only")) {
		h, rest, err := c.keys.ParseHostKey(k)
		if err != nil {
			t.Fatalf("key under /berth/hosts/: %v", err)
		}
		services[h] = services[h] || rest == "service"
		alive[h] = alive[h] || rest == "alive"
	}
	if len(services) != len(hosts) {
		t.Errorf("etcdctl shows service records of %v, the API lists %d hosts", services, len(hosts))
	}
	for _, h := range hosts {
		if !services[h.Host] || alive[h.Host] != (h.State == "up") {
			t.Errorf("%s: service key %v, alive key %v; the API says %s", h.Host, services[h.Host], alive[h.Host], h.State)
		}
		var svc etcdschema.Service
		value(t, c.keys.Service(h.Host), rec.run("get /berth/hosts/"+docHost+"/service --print-value-only", docHost, h.Host), &svc)
		if svc.Host != h.Host || svc.Cell != h.Cell || svc.Disabled != (h.Status == "disabled") || svc.ProviderUUID != h.Provider {
			t.Errorf("service record of %s: %+v; the API: %+v", h.Host, svc, h)
		}
		var aj etcdctlJSON
		out := rec.run("get /berth/hosts/"+docHost+"/alive -w json", docHost, h.Host)
		if err := json.Unmarshal([]byte(out), &aj); err != nil {
			t.Fatalf("alive of %s, -w json: %v\n%s", h.Host, err, out)
		}
		if (h.State == "up") != (aj.Count == 1) {
			t.Errorf("%s is %s, its alive key count is %d", h.Host, h.State, aj.Count)
		}
		if aj.Count == 1 {
			var al etcdschema.Alive
			kv := aj.Kvs[0]
			if err := etcdschema.Decode(string(kv.Key), kv.Value, &al); err != nil {
				t.Fatal(err)
			}
			if string(kv.Key) != c.keys.Alive(h.Host) || kv.Lease == 0 || al.LeaseID != kv.Lease {
				t.Errorf("alive key of %s: %s bound to lease %d, value names lease %d", h.Host, kv.Key, kv.Lease, al.LeaseID)
			}
		}
	}

	// ---- providers: one per host, usage as /v1/hosts shows it ---------------
	provKeys := ctlLines(rec.run("get --prefix /berth/placement/providers/ --keys-only"))
	if len(provKeys) != len(hosts) {
		t.Errorf("providers %v for %d hosts", provKeys, len(hosts))
	}
	for _, h := range hosts {
		if !slices.Contains(provKeys, c.keys.Provider(h.Provider)) {
			t.Errorf("no provider key for %s's %s", h.Host, h.Provider)
		}
		var pr etcdschema.Provider
		value(t, c.keys.Provider(h.Provider),
			rec.run("get /berth/placement/providers/"+docProvider+" --print-value-only", docProvider, h.Provider), &pr)
		for rc, u := range h.Resources {
			if pr.Usages[rc] != u.Used || pr.Inventories[rc].Capacity() != u.Capacity {
				t.Errorf("%s %s: provider record used %d of %d, the API %d of %d", h.Host, rc, pr.Usages[rc],
					pr.Inventories[rc].Capacity(), u.Used, u.Capacity)
			}
		}
	}

	// ---- instances through their mapping, and their allocations ----------
	used := map[string]map[string]int64{} // provider → resource class → sum of allocations
	for _, id := range []string{p, a, x} {
		value(t, c.keys.InstanceMapping(id), rec.run("get /berth/instance_mappings/"+docUUID+" --print-value-only", docUUID, id), &im)
		var inst etcdschema.Instance
		value(t, c.keys.CellInstance(im.Cell, id),
			rec.run("get /berth/cells/"+docCell+"/instances/"+docUUID+" --print-value-only", docUUID, id, docCell, im.Cell), &inst)
		show := showFields(c.cliOK("server", "show", id))
		v, err := c.api.GetServer(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.UUID != id || inst.Status != v.Status || inst.Host != v.Host || inst.Cell != v.Cell || im.Cell != "cell1" ||
			show["status"] != inst.Status || show["host"] != inst.Host || show["cell"] != inst.Cell || show["attempts"] != fmt.Sprint(inst.Attempts) {
			t.Errorf("instance %s: mapping %+v, record %+v; berth server show %v", id, im, inst, show)
		}
		if out := rec.run("get /berth/build_requests/"+docUUID+" --print-value-only", docUUID, id); out != "" {
			t.Errorf("build request of the scheduled %s: %s", id, out)
		}
		var con etcdschema.Consumer
		value(t, c.keys.Consumer(id), rec.run("get /berth/placement/consumers/"+docUUID+" --print-value-only", docUUID, id), &con)
		hostRP := agent.ProviderUUIDForHost(inst.Host)
		if len(con.Allocations) != 1 || con.Allocations[hostRP].Resources["MEMORY_MB"] != int64(v.Flavor.RAM) {
			t.Errorf("allocations of %s on %s: %+v, want %d MB there only", id, inst.Host, con.Allocations, v.Flavor.RAM)
		}
		for rp, al := range con.Allocations {
			if used[rp] == nil {
				used[rp] = map[string]int64{}
			}
			for rc, n := range al.Resources {
				used[rp][rc] += n
			}
		}
	}
	for _, h := range hosts {
		for rc, u := range h.Resources {
			if used[h.Provider][rc] != u.Used {
				t.Errorf("%s %s: the consumers hold %d, /v1/hosts says %d used", h.Host, rc, used[h.Provider][rc], u.Used)
			}
		}
	}

	// ---- the alternates of x: compute-1 failed, one alternate left; they
	// ride in x's cast to compute-2 -----------------------------------------
	var xCast etcdschema.Build
	value(t, c.keys.Build("compute-2", x), rec.run("get /berth/hosts/"+docHost+"/builds/"+docUUID+" --print-value-only",
		docHost, "compute-2", docUUID, x), &xCast)
	carried, ok, err := xCast.CarriedAlternates(c.keys.Build("compute-2", x))
	if err != nil || !ok {
		t.Fatalf("x's cast to compute-2 carries no alternates (%v): %+v", err, xCast)
	}
	alt := *carried
	if r, err := c.cli.Get(ctx, c.keys.AlternatesPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		t.Fatal(err)
	} else if r.Count != 0 {
		t.Errorf("%d alternates keys written; they ride in the casts", r.Count)
	}
	sel, err := c.api.GetSelection(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	if len(alt.Attempts) == 0 || alt.Attempts[0].Host != "compute-1" || !strings.Contains(alt.Attempts[0].Reason, "failed the build") ||
		len(alt.Remaining) != 1 || alt.MaxAttempts != 3 {
		t.Errorf("alternates of x: %+v", alt)
	}
	var altHosts, selHosts, attHosts, selAttHosts []string
	for _, r := range alt.Remaining {
		altHosts = append(altHosts, r.ServiceHost)
	}
	for _, r := range sel.Alternates {
		selHosts = append(selHosts, r.Host)
	}
	for _, at := range alt.Attempts {
		attHosts = append(attHosts, at.Host)
	}
	for _, at := range sel.Attempts {
		selAttHosts = append(selAttHosts, at.Host)
	}
	if !slices.Equal(altHosts, selHosts) || !slices.Equal(attHosts, selAttHosts) || alt.MaxAttempts != sel.MaxAttempts || !sel.Kept {
		t.Errorf("alternates of x: etcdctl remaining %v attempts %v, the API %v and %v (%+v)", altHosts, attHosts, selHosts, selAttHosts, sel)
	}
	if out := rec.run("get /berth/hosts/"+docHost+"/builds/"+docUUID+" --print-value-only", docUUID, a); out != "" {
		t.Errorf("the ACTIVE a still has a cast (and its alternates): %s", out)
	}

	// ---- the scheduler leader and the members --------------------------------
	cands := pairs(t, rec.run("get --prefix /berth/elections/scheduler/ --sort-by=CREATE --order=ASCEND"))
	if len(cands) != 2 {
		t.Fatalf("election candidates: %v, want one per scheduler", cands)
	}
	leaderKey, leaderID := cands[0][0], cands[0][1]
	// The leader's own log says it was elected, with its key. (Under load a
	// session may lapse and leadership move; the current leader has still
	// logged its election.)
	elected := regexp.MustCompile(`elected leader: id=(\S+) election_key=(\S+)`)
	var said []string
	for _, s := range []*proc{schedA, schedB} {
		b, _ := os.ReadFile(s.log)
		for _, m := range elected.FindAllStringSubmatch(string(b), -1) {
			said = append(said, m[1]+" "+m[2])
		}
	}
	if !slices.Contains(said, leaderID+" "+leaderKey) {
		t.Errorf("etcdctl names %s (%s) the leader; the schedulers' logs say %v", leaderID, leaderKey, said)
	}
	var candIDs, schedMembers, superMembers []string
	for _, cd := range cands {
		candIDs = append(candIDs, cd[1])
	}
	for _, kv := range pairs(t, rec.run("get --prefix /berth/members/")) {
		var m etcdschema.Member
		value(t, kv[0], kv[1], &m)
		if kv[0] != c.keys.Member(m.Role, m.ID) {
			t.Errorf("member %s stored at %s", m.ID, kv[0])
		}
		switch m.Role {
		case "scheduler":
			schedMembers = append(schedMembers, m.ID)
		case "superconductor":
			superMembers = append(superMembers, m.ID)
		}
	}
	sort.Strings(candIDs)
	sort.Strings(schedMembers)
	if !slices.Equal(candIDs, schedMembers) || len(superMembers) != 2 {
		t.Errorf("scheduler candidates %v, scheduler members %v, superconductors %v", candIDs, schedMembers, superMembers)
	}

	// ---- nothing pending in the cell any more -----------------------------
	if ks := ctlLines(rec.run("get --prefix /berth/cells/cell1/retries/ --keys-only")); len(ks) != 0 {
		t.Errorf("retries left: %v", ks)
	}
	if ls := pairs(t, rec.run("get --prefix /berth/cells/cell1/leases/")); len(ls) != 0 {
		t.Errorf("retry leases left: %v", ls)
	}

	// ---- the README's lab walk-through: every etcdctl line runs ------------
	if len(rec.readme) == 0 {
		t.Error("README.md has no lab etcdctl lines")
	}
	for _, cmdline := range rec.readme {
		rec.exec(strings.ReplaceAll(cmdline, "<id>", x))
	}

	// ---- berth debug dump says the same ---------------------------------------
	d := dumpJSON(t, c, "-config", filepath.Join(c.dir, "sched-a.hcl"))
	sum := d.Summary
	if sum.Undecodable != 0 || sum.Unknown != 0 {
		t.Errorf("dump: %d undecodable, %d unknown", sum.Undecodable, sum.Unknown)
	}
	if len(sum.Hosts) != len(hosts) {
		t.Fatalf("dump hosts %+v, API %+v", sum.Hosts, hosts)
	}
	for i, h := range hosts {
		dh := sum.Hosts[i]
		if dh.Host != h.Host || dh.Cell != h.Cell || dh.State != h.State || dh.Status != h.Status || dh.Instances != h.Instances {
			t.Errorf("dump host %+v, API %+v", dh, h)
		}
		for rc, u := range h.Resources {
			if dh.Resources[rc] != (dump.ResourceUsage{Used: u.Used, Capacity: u.Capacity}) {
				t.Errorf("dump %s %s: %+v, API %+v", h.Host, rc, dh.Resources[rc], u)
			}
		}
	}
	var cell1 dump.CellSummary
	for _, cl := range sum.Cells {
		if cl.Cell == "cell1" {
			cell1 = cl
		}
	}
	if cell1.Instances["ACTIVE"] != 2 || cell1.Instances["BUILD"] != 1 || cell1.Hosts != 5 || !cell1.Record {
		t.Errorf("dump of cell1: %+v", cell1)
	}
	if len(sum.Leaders) != 1 || sum.Leaders[0].ID != leaderID || sum.Leaders[0].Key != leaderKey || sum.Leaders[0].Candidates != 2 {
		t.Errorf("dump leaders %+v; etcdctl: %s at %s", sum.Leaders, leaderID, leaderKey)
	}
	if sum.InFlight.Alternates != 0 || sum.InFlight.Retries != 0 || sum.InFlight.BuildRequests != 0 {
		t.Errorf("dump in flight: %+v (no alternates keys: they ride in the casts)", sum.InFlight)
	}
	var dcast etcdschema.Build
	for _, e := range d.Kinds["builds"] {
		if e.Key == c.keys.Build("compute-2", x) {
			if err := json.Unmarshal(e.Value, &dcast); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dalt, ok, err := dcast.CarriedAlternates("dump"); err != nil || !ok || dalt.InstanceUUID != x ||
		len(dalt.Attempts) != len(alt.Attempts) || len(dalt.Remaining) != 1 {
		t.Errorf("dump's cast of x carries alternates %+v (%v, %v); etcdctl's: %+v", dalt, ok, err, alt)
	}
	// etcd's own view: the members and the leader the dump reports are
	// the ones etcdctl shows.
	if d.Etcd == nil || d.Etcd.Error != "" || len(d.Etcd.Members) != 1 || !d.Etcd.Members[0].Leader {
		t.Fatalf("dump's etcd section: %+v", d.Etcd)
	}
	members := rec.run("member list -w table")
	status := rec.run("endpoint status --cluster -w table")
	for _, m := range d.Etcd.Members {
		if !strings.Contains(members, m.ID) || !strings.Contains(members, m.Name) {
			t.Errorf("etcdctl member list lacks %s (%s):\n%s", m.ID, m.Name, members)
		}
		for _, u := range m.ClientURLs {
			if !regexp.MustCompile(regexp.QuoteMeta(u) + `\s*\|\s*` + m.ID + `\s*\|.*\|\s*true\s*\|`).MatchString(status) {
				t.Errorf("etcdctl endpoint status does not show %s at %s as the leader:\n%s", m.ID, u, status)
			}
		}
	}

	out, err := cli(t, c.apiURL, "debug", "dump", "-etcd", c.etcd.ClientURL())
	if err != nil {
		t.Fatalf("berth debug dump: %v\n%s", err, out)
	}
	for _, re := range []string{
		`(?m)^compute-4\s+cell1\s+up\s+disabled \(maintenance\)\s`,
		`(?m)^compute-5\s+cell1\s+down\b`,
		`(?m)^cell1\s+5\s+false\s+1\s+2\s+0\s+0\s+0 \(0 leased\)$`,
		`(?m)^scheduler\s+` + regexp.QuoteMeta(leaderID) + `\s+` + regexp.QuoteMeta(leaderKey) + `\s+2$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("dump table does not match %s:\n%s", re, out)
		}
	}
}

// dumpDoc is the part of `berth debug dump -format json` the test reads.
type dumpDoc struct {
	Revision int64         `json:"revision"`
	Summary  dump.Summary  `json:"summary"`
	Etcd     *dump.Cluster `json:"etcd"`
	Kinds    map[string][]struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	} `json:"kinds"`
}

func dumpJSON(t *testing.T, c *cluster, args ...string) dumpDoc {
	t.Helper()
	out := filepath.Join(t.TempDir(), "dump.json")
	msg, err := cli(t, c.apiURL, append([]string{"debug", "dump", "-format", "json", "-o", out}, args...)...)
	if err != nil {
		t.Fatalf("berth debug dump: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var d dumpDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("dump is not JSON: %v", err)
	}
	if d.Revision == 0 || !strings.Contains(msg, fmt.Sprintf("at revision %d", d.Revision)) {
		t.Fatalf("dump revision %d; berth said %q", d.Revision, msg)
	}
	return d
}
