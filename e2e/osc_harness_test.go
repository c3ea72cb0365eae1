package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/berth-project/berth/internal/etcdtest"
)

// Helpers for osc_placement_test.go: run the openstack CLI, parse what it
// prints, start a Placement-only berth server.

// oscPlacementVersion is the microversion the CLI asks for: the Zed-era
// maximum, which Berth serves.
const oscPlacementVersion = "1.39"

// osc runs the openstack CLI against one Placement endpoint with one token.
type osc struct {
	endpoint, token string
	env             []string
}

// skipWithoutOSC skips the test when the openstack CLI is not installed:
// the only reason an osc test may skip as a whole.
func skipWithoutOSC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("openstack"); err != nil {
		t.Skip("openstack CLI not installed (Debian: apt-get install python3-openstackclient python3-osc-placement; .ci/run does it)")
	}
}

func newOSC(t *testing.T, endpoint, token string) *osc {
	t.Helper()
	skipWithoutOSC(t)
	// A private HOME and no OS_* variables: a clouds.yaml or an OS_CLOUD
	// of the machine must not change what the CLI talks to.
	env := []string{"HOME=" + t.TempDir(), "LANG=C.UTF-8"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return &osc{endpoint: endpoint, token: token, env: env}
}

// run runs `openstack <auth flags> args...` at the given microversion.
func (o *osc) runAt(t *testing.T, version string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	full := append([]string{"--os-auth-type", "admin_token", "--os-token", o.token,
		"--os-endpoint", o.endpoint, "--os-placement-api-version", version}, args...)
	cmd := exec.Command("openstack", full...)
	cmd.Env = o.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if strings.Contains(errOut.String(), "is not an openstack command") {
		t.Fatalf("openstack %s: the CLI lacks the Placement commands; install python3-osc-placement\n%s", strings.Join(args, " "), errOut.String())
	}
	return out.String(), errOut.String(), err
}

// ok runs a command that must succeed and returns what it printed.
func (o *osc) ok(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := o.runAt(t, oscPlacementVersion, args...)
	if err != nil {
		t.Fatalf("openstack %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// json runs a command with -f json and decodes what it printed into v.
func (o *osc) json(t *testing.T, v any, args ...string) {
	t.Helper()
	out := o.ok(t, append(args, "-f", "json")...)
	// Start from zero: Unmarshal merges into maps already in v, and a
	// check must see only what this command printed.
	rv := reflect.ValueOf(v).Elem()
	rv.Set(reflect.Zero(rv.Type()))
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("openstack %s -f json printed no JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fails runs a command that must fail and returns the message it printed
// on stderr, trimmed.
func (o *osc) fails(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := o.runAt(t, oscPlacementVersion, args...)
	if err == nil {
		t.Fatalf("openstack %s succeeded, want an error\nstdout: %s", strings.Join(args, " "), out)
	}
	return strings.TrimSpace(errOut)
}

// failsWith runs a failing command and checks its message exactly.
func (o *osc) failsWith(t *testing.T, want string, args ...string) {
	t.Helper()
	if got := o.fails(t, args...); got != want {
		t.Errorf("openstack %s printed\n  %q\nwant\n  %q", strings.Join(args, " "), got, want)
	}
}

// table parses cliff's table format into rows of column → cell.
func table(t *testing.T, out string) []map[string]string {
	t.Helper()
	var header []string
	var rows []map[string]string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if header == nil {
			header = cells
			continue
		}
		if len(cells) != len(header) {
			t.Fatalf("table row %q has %d cells, header %v has %d", line, len(cells), header, len(header))
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = cells[i]
		}
		rows = append(rows, row)
	}
	if header == nil {
		t.Fatalf("no table in output:\n%s", out)
	}
	return rows
}

// fields turns a show command's Field/Value table into a map.
func fields(t *testing.T, out string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, r := range table(t, out) {
		m[r["Field"]] = r["Value"]
	}
	return m
}

// lines splits -f value output into trimmed non-empty lines.
func lines(out string) []string {
	var ls []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	return ls
}

func sorted(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !reflect.DeepEqual(sorted(got), sorted(want)) {
		t.Errorf("%s = %v, want %v", what, sorted(got), sorted(want))
	}
}

// kvList parses the CLI's "A=1,B=2" and "A=1/4,B=0/8" cells.
func kvList(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

type oscProvider struct {
	UUID        string                     `json:"uuid"`
	Name        string                     `json:"name"`
	Generation  int                        `json:"generation"`
	Root        string                     `json:"root_provider_uuid"`
	Parent      *string                    `json:"parent_provider_uuid"`
	Allocations map[string]json.RawMessage `json:"allocations"`
}

type oscInventory struct {
	ResourceClass   string  `json:"resource_class"`
	AllocationRatio float64 `json:"allocation_ratio"`
	MinUnit         int     `json:"min_unit"`
	MaxUnit         int     `json:"max_unit"`
	Reserved        int     `json:"reserved"`
	StepSize        int     `json:"step_size"`
	Total           int     `json:"total"`
	Used            *int    `json:"used"`
}

type oscAllocation struct {
	ResourceProvider string         `json:"resource_provider"`
	Generation       int            `json:"generation"`
	Resources        map[string]int `json:"resources"`
	ProjectID        string         `json:"project_id"`
	UserID           string         `json:"user_id"`
	ConsumerType     string         `json:"consumer_type"`
}

type oscCandidate struct {
	N            int    `json:"#"`
	Allocation   string `json:"allocation"`
	Provider     string `json:"resource provider"`
	UsedCapacity string `json:"inventory used/capacity"`
	Traits       string `json:"traits"`
}

func inventoryByClass(t *testing.T, invs []oscInventory) map[string]oscInventory {
	t.Helper()
	m := map[string]oscInventory{}
	for _, inv := range invs {
		m[inv.ResourceClass] = inv
	}
	return m
}

func names(rows []map[string]string, col string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r[col])
	}
	return out
}

// startBerthPlacement runs `berth server` with only the placement role,
// over its own embedded etcd, and returns the Placement URL.
func startBerthPlacement(t *testing.T, extra string) string {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	cfg := writeFile(t, dir, "placement.hcl", fmt.Sprintf(`
etcd {
  embedded {
    data_dir   = %q
    client_url = "http://127.0.0.1:%d"
    peer_url   = "http://127.0.0.1:%d"
  }
}
placement {
  bind = %q
%s}
`, filepath.Join(dir, "etcd"), etcdtest.FreePort(t), etcdtest.FreePort(t), addr, extra))
	startProc(t, "placement", "run", "server", "-config", cfg)
	url := "http://" + addr
	waitHTTP(t, url+"/")
	return url
}

// consumerGeneration reads a consumer's generation over plain HTTP: the
// CLI uses it (1.28+) but never prints it.
func consumerGeneration(t *testing.T, endpoint, token, consumer string) *int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, endpoint+"/allocations/"+consumer, nil)
	req.Header.Set("X-Auth-Token", token)
	req.Header.Set("OpenStack-API-Version", "placement "+oscPlacementVersion)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		ConsumerGeneration *int `json:"consumer_generation"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("GET /allocations/%s: %v", consumer, err)
	}
	return body.ConsumerGeneration
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// devStack is a `berth dev` the compute tests start: noauth Nova API,
// Placement, one cell per -cells, fake agents.
type devStack struct {
	apiURL       string // the Nova API, without /v2.1
	placementURL string
}

// startDevStack starts `berth dev` with hosts fake agents in cells
// cells, every port drawn free, and waits until its hosts are up.
func startDevStack(t *testing.T, hosts, cells int) devStack {
	t.Helper()
	apiAddr, placeAddr := freeAddr(t), freeAddr(t)
	startProc(t, "dev", "dev", "-data-dir", t.TempDir(),
		"-etcd", freeAddr(t), "-etcd-peer", freeAddr(t),
		"-api", apiAddr, "-placement", placeAddr, "-identity", freeAddr(t), "-image", freeAddr(t),
		"-hosts", fmt.Sprint(hosts), "-cells", fmt.Sprint(cells))
	apiURL := "http://" + apiAddr
	waitHTTP(t, apiURL+"/healthz")
	waitHostsUp(t, apiURL, hosts)
	return devStack{apiURL: apiURL, placementURL: "http://" + placeAddr}
}

// computeCLI returns a runner of `openstack` against a noauth Nova API
// at compute (".../v2.1") at microversion 2.latest, failing the test on
// an error. keystoneauth's "admin_token" plugin sends noauth2's admin
// token "admin:admin" (its "none" plugin would be a non-admin).
func computeCLI(t *testing.T, compute string) func(args ...string) string {
	t.Helper()
	env := newOSC(t, compute, "").env
	return func(args ...string) string {
		t.Helper()
		full := append([]string{"--os-auth-type", "admin_token", "--os-token", "admin:admin", "--os-endpoint", compute,
			"--os-compute-api-version", "2.latest"}, args...)
		cmd := exec.Command("openstack", full...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("openstack %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String()
	}
}
