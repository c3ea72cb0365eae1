package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/dump"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/stack"
	"github.com/berth-project/berth/internal/testwait"
)

// startDebugStack runs every role in this process over a fresh embedded
// etcd, as `berth dev` does, with two hosts in cell1: compute-1 (more RAM,
// so tried first) fails every build, compute-2 builds. It returns the
// stack, the etcd client URL and an API client.
func startDebugStack(t *testing.T) (*stack.Stack, string, *api.Client) {
	t.Helper()
	srv := etcdtest.Start(t)
	cfg := configs.Defaults()
	cfg.EnableAllRoles()
	cfg.Etcd.Embedded, cfg.Etcd.Endpoints = nil, []string{srv.ClientURL()}
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	s := stack.New(cfg, hclog.NewNullLogger())
	s.Attach(srv.Client())
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.StartServerRoles(ctx); err != nil {
		t.Fatalf("start server roles: %v", err)
	}
	cc := *cfg.Conductor
	cc.Cell = "cell1"
	if err := s.StartConductor(ctx, &cc); err != nil {
		t.Fatalf("start conductor: %v", err)
	}
	for _, h := range []struct {
		name string
		mem  int64
		fail bool
	}{{"compute-1", 16384, true}, {"compute-2", 8192, false}} {
		a := *cfg.Agent
		a.Host, a.Cell = h.name, "cell1"
		a.ReportInterval, a.ServiceDownTime = time.Second, 3*time.Second
		a.Inventory.VCPUs, a.Inventory.MemoryMB, a.Inventory.DiskGB = 8, h.mem, 200
		a.Fake.Fail, a.Fake.FailReschedulable = h.fail, true
		if err := s.StartAgent(ctx, &a, t.TempDir()); err != nil {
			t.Fatalf("start agent %s: %v", h.name, err)
		}
	}
	apiURL := s.Endpoint("compute API")
	if apiURL == "" {
		t.Fatalf("no compute API in %v", s.Endpoints)
	}
	c := api.NewClient(apiURL)
	c.HTTP.Timeout = time.Minute
	testwait.Poll(t, 30*time.Second, "both hosts up", func() (bool, string) {
		svcs, err := c.ListServices(context.Background())
		up := 0
		for _, sv := range svcs {
			if sv.State == "up" {
				up++
			}
		}
		return err == nil && up == 2, fmt.Sprintf("%+v %v", svcs, err)
	})
	return s, srv.ClientURL(), c
}

func settled(t *testing.T, c *api.Client, id string) *api.ServerView {
	t.Helper()
	var v *api.ServerView
	testwait.Poll(t, 60*time.Second, "server "+id+" ACTIVE or ERROR", func() (bool, string) {
		var err error
		v, err = c.GetServer(context.Background(), id)
		return err == nil && (v.Status == "ACTIVE" || v.Status == "ERROR"), fmt.Sprintf("%+v %v", v, err)
	})
	return v
}

func runDump(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(append([]string{"debug", "dump"}, args...), &o, &e)
	return o.String(), e.String(), code
}

// TestDebugDump populates etcd through the real roles (a build retried
// after a failing host, one that fits nowhere, a disabled host), adds a
// value a newer version wrote, a corrupt one and a key no version of
// Berth knows, and checks both formats of `berth debug dump` against the
// API.
func TestDebugDump(t *testing.T) {
	s, etcdURL, c := startDebugStack(t)
	ctx := context.Background()

	create := func(name, flavor string) string {
		resp, err := c.CreateServers(ctx, api.CreateRequest{Name: name, Flavor: flavor, Count: 1})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return resp.Servers[0].ID
	}
	retried := create("retried", "m1.small")
	if v := settled(t, c, retried); v.Status != "ACTIVE" || v.Host != "compute-2" || v.Attempts != 2 {
		t.Fatalf("retried: %+v, want ACTIVE on compute-2 after 2 attempts", v)
	}
	// 16384 MB does not fit on either host (compute-1 reserves 512).
	nowhere := create("nowhere", "m1.xlarge")
	if v := settled(t, c, nowhere); v.Status != "ERROR" {
		t.Fatalf("nowhere: %+v, want ERROR", v)
	}
	reason := "flaky"
	disabled := "disabled"
	if _, err := c.UpdateService(ctx, "compute-1", api.ServiceUpdate{Status: &disabled, DisabledReason: &reason}); err != nil {
		t.Fatalf("disable compute-1: %v", err)
	}

	// A value from a newer Berth, a corrupt one and an unknown key.
	newer := s.Keys().Flavor("m1.future")
	corrupt := s.Keys().CellInstance("cell1", "00000000-0000-4000-8000-00000000dead")
	unknown := s.Keys().All() + "future/feature/x"
	for k, v := range map[string]string{newer: `{"version": 99, "id": "9", "name": "m1.future"}`,
		corrupt: `{"version": 1, "uuid": `, unknown: "hello"} {
		if _, err := s.Client().Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	last, err := s.Client().Get(ctx, unknown)
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := c.ListHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	servers, err := c.ListServers(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// ---- JSON, to a file --------------------------------------------------
	out := filepath.Join(t.TempDir(), "dump.json")
	stdout, stderr, code := runDump(t, "-etcd", etcdURL, "-format", "json", "-o", out)
	if code != 0 || stdout != "" {
		t.Fatalf("dump -format json -o: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "(2 undecodable, 1 unknown: see the dump)") {
		t.Errorf("stderr does not report the bad keys: %s", stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Prefix   string       `json:"prefix"`
		Revision int64        `json:"revision"`
		Summary  dump.Summary `json:"summary"`
		Kinds    map[string][]struct {
			Key         string          `json:"key"`
			Value       json.RawMessage `json:"value"`
			Raw         string          `json:"raw"`
			Error       string          `json:"error"`
			ModRevision int64           `json:"mod_revision"`
			Lease       string          `json:"lease"`
		} `json:"kinds"`
		Unknown []struct {
			Key string `json:"key"`
			Raw string `json:"raw"`
		} `json:"unknown"`
		Undecodable []struct {
			Key   string `json:"key"`
			Error string `json:"error"`
		} `json:"undecodable"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("dump is not JSON: %v\n%s", err, b)
	}
	if doc.Prefix != "/berth" || doc.Revision < last.Header.Revision {
		t.Fatalf("dump of %s at revision %d, want /berth at %d or later", doc.Prefix, doc.Revision, last.Header.Revision)
	}
	for g, es := range doc.Kinds {
		for _, e := range es {
			if e.ModRevision > doc.Revision {
				t.Errorf("%s %s modified at %d, after the dump's revision %d", g, e.Key, e.ModRevision, doc.Revision)
			}
			if e.Error == "" && (len(e.Value) == 0 || e.Value[0] == '"' && g != "election_candidates") {
				t.Errorf("%s %s: value not decoded: %s", g, e.Key, e.Value)
			}
		}
	}

	// The hosts as the API lists them.
	sum := doc.Summary
	if len(sum.Hosts) != len(hosts) {
		t.Fatalf("dump has %d hosts, the API %d:\n%+v", len(sum.Hosts), len(hosts), sum.Hosts)
	}
	for i, h := range hosts {
		d := sum.Hosts[i]
		if d.Host != h.Host || d.Cell != h.Cell || d.Mapped != h.Mapped || d.State != h.State || d.Status != h.Status ||
			d.Instances != h.Instances || d.Provider != h.Provider {
			t.Errorf("host %d: dump %+v, API %+v", i, d, h)
		}
		for rc, u := range h.Resources {
			if d.Resources[rc] != (dump.ResourceUsage{Used: u.Used, Capacity: u.Capacity}) {
				t.Errorf("%s %s: dump %+v, API %+v", h.Host, rc, d.Resources[rc], u)
			}
		}
	}
	if sum.Hosts[0].DisabledReason != "flaky" || sum.Hosts[1].Resources["MEMORY_MB"].Used != 2048 {
		t.Errorf("hosts: %+v", sum.Hosts)
	}
	// Instances per cell and status, as the API lists servers; the corrupt
	// record counts as undecodable, not as an instance.
	want := map[string]map[string]int{}
	for _, v := range servers {
		cell := v.Cell
		if cell == "" {
			cell = etcdschema.Cell0
		}
		if want[cell] == nil {
			want[cell] = map[string]int{}
		}
		want[cell][v.Status]++
	}
	got := map[string]map[string]int{}
	for _, cl := range sum.Cells {
		if len(cl.Instances) > 0 {
			got[cl.Cell] = cl.Instances
		}
	}
	if !reflect.DeepEqual(got, want) || got["cell1"]["ACTIVE"] != 1 || got[etcdschema.Cell0]["ERROR"] != 1 {
		t.Errorf("instances by cell: dump %v, API %v", got, want)
	}
	for _, cl := range sum.Cells {
		if cl.Cell == etcdschema.Cell0 && cl.Record {
			t.Errorf("cell0 has no record, the dump says it has: %+v", cl)
		}
	}
	if sum.Undecodable != 2 || sum.Unknown != 1 || sum.Counts["services"] != 2 || sum.Counts["flavors"] != len(api.DefaultFlavors())+1 {
		t.Errorf("counts: %+v undecodable %d unknown %d", sum.Counts, sum.Undecodable, sum.Unknown)
	}
	if len(sum.Leaders) != 1 || sum.Leaders[0].Role != "scheduler" || sum.Leaders[0].ID != s.SchedulerID() || sum.Leaders[0].Candidates != 1 {
		t.Errorf("leaders: %+v, want scheduler %s", sum.Leaders, s.SchedulerID())
	}
	if ms := sum.Members["scheduler"]; len(ms) != 1 || ms[0].ID != s.SchedulerID() || ms[0].URL == "" {
		t.Errorf("scheduler members: %+v", ms)
	}
	if sum.InFlight != (dump.InFlight{}) {
		t.Errorf("nothing is in flight, the dump says %+v", sum.InFlight)
	}

	// The retried instance's record, decoded, with its failed attempt.
	found := false
	for _, e := range doc.Kinds["instances"] {
		if e.Key != s.Keys().CellInstance("cell1", retried) {
			continue
		}
		found = true
		var inst etcdschema.Instance
		if err := json.Unmarshal(e.Value, &inst); err != nil || inst.Status != "ACTIVE" || len(inst.FailedAttempts) != 1 ||
			inst.FailedAttempts[0].Host != "compute-1" {
			t.Errorf("instance record of %s: %s (%v)", retried, e.Value, err)
		}
	}
	if !found {
		t.Errorf("no instance record of %s in the dump", retried)
	}
	// The alive keys are lease-bound; the dump says by which lease.
	for _, e := range doc.Kinds["alive"] {
		var a etcdschema.Alive
		if err := json.Unmarshal(e.Value, &a); err != nil || e.Lease != fmt.Sprintf("%x", a.LeaseID) {
			t.Errorf("alive %s: lease %q, value %s (%v)", e.Key, e.Lease, e.Value, err)
		}
	}

	// Undecodable values: raw, with the error, beside the good ones.
	bad := map[string]string{}
	for _, g := range []string{"flavors", "instances"} {
		for _, e := range doc.Kinds[g] {
			if e.Error != "" {
				bad[e.Key] = e.Error
				if e.Value != nil || e.Raw == "" {
					t.Errorf("%s: value %s, raw %q", e.Key, e.Value, e.Raw)
				}
			}
		}
	}
	if !strings.Contains(bad[newer], "version 99") || !strings.Contains(bad[corrupt], "unexpected end of JSON") || len(bad) != 2 {
		t.Errorf("undecodable entries: %v", bad)
	}
	if len(doc.Undecodable) != 2 {
		t.Errorf("undecodable list: %+v", doc.Undecodable)
	}
	if len(doc.Unknown) != 1 || doc.Unknown[0].Key != unknown || doc.Unknown[0].Raw != "hello" {
		t.Errorf("unknown keys: %+v", doc.Unknown)
	}

	// ---- the table, from the config file's etcd block ---------------------
	cfgFile := filepath.Join(t.TempDir(), "agent.hcl")
	if err := os.WriteFile(cfgFile, []byte(fmt.Sprintf("etcd {\n  endpoints = [%q]\n  prefix = \"/berth\"\n}\n", etcdURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	table, stderr, code := runDump(t, "-config", cfgFile)
	if code != 0 {
		t.Fatalf("dump -config: exit %d: %s", code, stderr)
	}
	for _, re := range []string{
		`(?m)^berth state under /berth at etcd revision \d+ .*: \d+ keys, 2 undecodable, 1 unknown$`,
		`(?m)^services\s+2$`,
		`(?m)^compute-1\s+cell1\s+up\s+disabled \(flaky\)\s+0\s+0\s+0/32\s+0/15872\s+0/200$`,
		`(?m)^compute-2\s+cell1\s+up\s+enabled\s+1\s+0\s+1/32\s+2048/7680\s+20/200$`,
		`(?m)^cell0 \(no record\)\s+0\s+false\s+0\s+0\s+1\s+0\s+0 \(0 leased\)$`,
		`(?m)^cell1\s+2\s+false\s+0\s+1\s+0\s+0\s+0 \(0 leased\)$`,
		`(?m)^scheduler\s+` + regexp.QuoteMeta(s.SchedulerID()) + `\s+/berth/elections/scheduler/[0-9a-f]+\s+1$`,
		`(?m)^UNDECODABLE\s+ERROR$`,
		`(?m)^` + regexp.QuoteMeta(newer) + `\s+decode .*version 99`,
		`(?m)^` + regexp.QuoteMeta(unknown) + `\s+5$`,
	} {
		if !regexp.MustCompile(re).MatchString(table) {
			t.Errorf("table does not match %s:\n%s", re, table)
		}
	}

	// An etcd member's own config (embedded block): the dump dials its
	// client_url, as an operator on that machine would.
	memberCfg := filepath.Join(t.TempDir(), "etcd.hcl")
	if err := os.WriteFile(memberCfg, []byte(fmt.Sprintf("etcd {\n  embedded {\n    name = \"etcd-1\"\n    data_dir = \"/var/lib/berth/etcd\"\n    client_url = %q\n  }\n}\n", etcdURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runDump(t, "-config", memberCfg, "-format", "json", "-o", filepath.Join(t.TempDir(), "m.json")); code != 0 ||
		!strings.Contains(stderr, "2 undecodable, 1 unknown") {
		t.Errorf("dump -config of an etcd member's file: exit %d: %s", code, stderr)
	}

	// Another prefix holds nothing; that is a dump, not an error.
	empty, stderr, code := runDump(t, "-etcd", etcdURL, "-prefix", "/elsewhere", "-format", "json")
	if code != 0 || !strings.Contains(empty, `"keys": 0`) {
		t.Errorf("dump of an empty prefix: exit %d, %s %s", code, empty, stderr)
	}
}

func TestDebugDumpFlagErrors(t *testing.T) {
	dead := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-format", "yaml"}, 2, `-format "yaml": want table or json`},
		{[]string{"-etcd", "127.0.0.1:1", "-config", "x.hcl"}, 2, "--etcd and --config both name the cluster"},
		{[]string{"-etcd", " , "}, 2, "names no endpoint"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-config", "/nonexistent/berth.hcl"}, 2, "/nonexistent/berth.hcl"},
		{[]string{"-etcd", dead, "-timeout", "1s"}, 1, "read etcd at [" + dead + "]"},
	} {
		_, stderr, code := runDump(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("berth debug dump %v: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, stderr, tc.code, tc.want)
		}
	}
	var o, e bytes.Buffer
	if code := run([]string{"debug", "undump"}, &o, &e); code != 2 || !strings.Contains(e.String(), `unknown command "undump"`) {
		t.Errorf("berth debug undump: exit %d, %s", code, e.String())
	}
}
