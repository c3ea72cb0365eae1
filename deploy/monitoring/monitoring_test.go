package monitoring

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/metrics"
)

// promtool is the real rule checker, from Debian's prometheus package.
// Absent locally, the tests that need it skip and say so; in CI (CI=true)
// its absence fails them: .ci/run installs it.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("promtool not found and CI=true: install Debian's prometheus package (apt-get install prometheus)")
	}
	t.Skip("promtool not found: install Debian's prometheus package to check the rules (CI=true makes this a failure)")
	return ""
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// TestAlertRules: promtool loads the rules, and its unit tests see each
// alert fire on the series that should raise it and stay quiet otherwise.
func TestAlertRules(t *testing.T) {
	pt := promtool(t)
	run(t, pt, "check", "rules", "alerts.yml")
	run(t, pt, "test", "rules", "alerts_test.yml")
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	UID    string `json:"uid"`
	Title  string `json:"title"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
		GridPos struct{ X, Y, W, H int } `json:"gridPos"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("berth-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("berth-dashboard.json: %v", err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard without uid, title or panels: %+v", d)
	}
	return d
}

// grafanaVars are the dashboard's variables, replaced by what Grafana
// would send for "All" so that Prometheus's parser can read the queries.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$cell", ".*", "$zone", ".*")

// dashboardExprs are every query of the dashboard, keyed by panel and ref.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range readDashboard(t).Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("panel %q target %s has no expr", p.Title, tg.RefID)
			}
			out[p.Title+" "+tg.RefID] = grafanaVars.Replace(tg.Expr)
		}
	}
	return out
}

// TestDashboardQueriesParse hands every dashboard query to promtool as a
// recording rule: Prometheus's own parser reads each one.
func TestDashboardQueriesParse(t *testing.T) {
	pt := promtool(t)
	exprs := dashboardExprs(t)
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, k := range keys {
		q, _ := json.Marshal(exprs[k]) // a JSON string is a YAML string
		b.WriteString("      - record: dashboard:query_" + strconv.Itoa(i) + "\n")
		b.WriteString("        expr: " + string(q) + "\n")
	}
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, pt, "check", "rules", path)
}

// exported is every metric family a Berth process can export, from a
// real registry with every collector registered and a series in each.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New()
	m.WatchHosts(func() metrics.HostCounts { return metrics.HostCounts{Up: 1} })
	m.WatchCapacity(func(visit func(metrics.CapacityRow)) {
		visit(metrics.CapacityRow{Host: "h", Cell: "cell1", Zone: "nova", ResourceClass: "VCPU", Capacity: 8})
	}, true)
	m.Leading(true)
	m.SetServerCounts(map[metrics.ServerKey]int{{Status: "ACTIVE", Cell: "cell1"}: 1})
	m.DeclareDuties("down_hosts")
	h := m.InstrumentHTTP("compute API", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	if _, err := m.InstrumentKV(etcdtest.Client(t).KV).Get(t.Context(), "/k"); err != nil {
		t.Fatal(err)
	}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		out[mf.GetName()] = true
		if mf.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_count", "_sum"} {
				out[mf.GetName()+s] = true
			}
		}
	}
	return out
}

// berthName finds Berth's metric names in a query or rule file.
var berthName = regexp.MustCompile(`\bberth_[a-z_]+\b`)

// TestEveryNamedMetricIsExported: a renamed or misspelt metric in the
// alerts or the dashboard would make an alert that never fires or an
// empty graph; each name must be one Berth exports.
func TestEveryNamedMetricIsExported(t *testing.T) {
	have := exported(t)
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{"alerts.yml": string(rules)}
	for k, e := range dashboardExprs(t) {
		sources["dashboard "+k] = e
	}
	for where, text := range sources {
		for _, n := range berthName.FindAllString(text, -1) {
			if !have[n] {
				t.Errorf("%s names %s, which no Berth process exports", where, n)
			}
		}
	}
}

// TestMetricsDocumented: every family a Berth process exports is in
// docs/operations.md's metrics table.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for n := range exported(t) {
		if !strings.HasPrefix(n, "berth_") || strings.HasSuffix(n, "_bucket") || strings.HasSuffix(n, "_count") || strings.HasSuffix(n, "_sum") {
			continue
		}
		if !strings.Contains(string(doc), "`"+n+"`") {
			t.Errorf("%s is not documented in docs/operations.md", n)
		}
	}
}
