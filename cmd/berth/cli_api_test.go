package main

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/berth-project/berth/configs"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/ with what the CLI prints now")

// golden compares got with testdata/name, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func lines(s string) []string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(l)
	return l
}

// TestCLIAgainstDevNoauth drives every API command against an in-process
// `berth dev` in noauth mode, as `berth dev` is used: no clouds.yaml, no
// OS_* variables, only BERTH_API naming its port.
func TestCLIAgainstDevNoauth(t *testing.T) {
	st := startCLIStack(t, configs.AuthNoAuth)
	cleanEnv(t, "BERTH_API", st.compute)

	// What is the same on every dev, in every format.
	for _, f := range []string{"table", "json", "yaml", "value"} {
		golden(t, "flavor_list."+f, mustBerth(t, "flavor", "list", "-o", f))
		golden(t, "zone_list."+f, mustBerth(t, "zone", "list", "-o", f))
	}
	if got := lines(mustBerth(t, "hypervisor", "list", "-o", "value", "-c", "hypervisor_hostname", "-c", "state", "-c", "status")); !slices.Equal(got,
		[]string{"compute-1 up enabled", "compute-2 up enabled", "compute-3 up enabled"}) {
		t.Errorf("hypervisor list = %q", got)
	}
	if out := mustBerth(t, "hypervisor", "show", "compute-2", "-o", "value", "-c", "hypervisor_hostname", "-c", "state"); out != "compute-2\nup\n" {
		t.Errorf("hypervisor show compute-2 = %q", out)
	}

	// server create --wait: three servers, settled, in JSON.
	var created []map[string]any
	if err := json.Unmarshal([]byte(mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--count", "3", "--name", "web",
		"--wait", "--interval", "100ms", "-o", "json")), &created); err != nil {
		t.Fatal(err)
	}
	if len(created) != 3 {
		t.Fatalf("created %v, want 3 servers", created)
	}
	for _, s := range created {
		if s["status"] != "ACTIVE" || s["host"] == "" || s["flavor"] != "m1.tiny" {
			t.Errorf("created server %v: want ACTIVE on a host, flavor m1.tiny", s)
		}
	}
	if got := lines(mustBerth(t, "server", "list", "-o", "value", "-c", "name", "-c", "status")); !slices.Equal(got,
		[]string{"web-1 ACTIVE", "web-2 ACTIVE", "web-3 ACTIVE"}) {
		t.Errorf("server list -o value = %q", got)
	}
	var shown map[string]any
	if err := json.Unmarshal([]byte(mustBerth(t, "server", "show", "web-1", "-o", "json")), &shown); err != nil {
		t.Fatal(err)
	}
	if shown["name"] != "web-1" || shown["vm_state"] != "active" || shown["power_state"] != "Running" || shown["zone"] != "nova" {
		t.Errorf("server show web-1 = %v", shown)
	}
	if out := mustBerth(t, "server", "show", shown["id"].(string), "-o", "yaml", "-c", "name"); out != "name: web-1\n" {
		t.Errorf("server show ID -o yaml -c name = %q", out)
	}
	if out := mustBerth(t, "__complete", "server", "show", ""); !slices.Equal(lines(out), []string{":4", "web-1", "web-2", "web-3"}) {
		t.Errorf("completion of server names:\n%s", out)
	}
	if out := mustBerth(t, "__complete", "flavor", "delete", ""); !strings.HasPrefix(out, "m1.tiny\nm1.small\n") {
		t.Errorf("completion of flavor names:\n%s", out)
	}
	if out := mustBerth(t, "selection", "show", "web-1", "-o", "value", "-c", "status", "-c", "kind", "-c", "n", "-c", "host"); !regexp.MustCompile(`^ACTIVE server 1 compute-\d\n$`).MatchString(out) {
		t.Errorf("selection show web-1:\n%s", out)
	}

	// A server group named by name in a hint.
	gid := strings.TrimSpace(mustBerth(t, "server-group", "create", "spread", "--policy", "anti-affinity", "-o", "value", "-c", "id"))
	mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--name", "member", "--hint", "group=spread", "--wait", "--interval", "100ms")
	if out := mustBerth(t, "server-group", "show", "spread", "-o", "value", "-c", "id", "-c", "policy", "-c", "members"); !strings.HasPrefix(out, gid+"\nanti-affinity\n") ||
		strings.Count(out, "-") < 8 {
		t.Errorf("server-group show spread = %q", out)
	}

	// Aggregates by name.
	mustBerth(t, "aggregate", "create", "east", "--az", "az-east")
	mustBerth(t, "aggregate", "add-host", "east", "compute-3")
	mustBerth(t, "aggregate", "set", "east", "ssd=true")
	if out := mustBerth(t, "aggregate", "show", "east", "-o", "json", "-c", "zone", "-c", "hosts", "-c", "metadata"); out != `{
  "zone": "az-east",
  "hosts": [
    "compute-3"
  ],
  "metadata": {
    "availability_zone": "az-east",
    "ssd": "true"
  }
}
` {
		t.Errorf("aggregate show east:\n%s", out)
	}
	mustBerth(t, "aggregate", "unset", "east", "ssd")
	mustBerth(t, "aggregate", "remove-host", "east", "compute-3")
	mustBerth(t, "aggregate", "delete", "east")

	// Services: disable answers once the agent set the trait.
	if out := mustBerth(t, "service", "disable", "compute-2", "--reason", "bad fan", "-o", "value", "-c", "host", "-c", "status", "-c", "disabled_reason"); out != "compute-2 disabled bad fan\n" {
		t.Errorf("service disable = %q", out)
	}
	if out := mustBerth(t, "host", "list", "-o", "value", "-c", "host", "-c", "status"); !strings.Contains(out, "compute-2 disabled\n") {
		t.Errorf("host list after disable:\n%s", out)
	}
	mustBerth(t, "service", "enable", "compute-2")
	if got := lines(mustBerth(t, "cell", "list", "-o", "value", "-c", "name")); !slices.Equal(got, []string{"cell1", "cell2"}) {
		t.Errorf("cell list = %q", got)
	}

	// Flavors with properties.
	if out := mustBerth(t, "flavor", "create", "small-ssd", "--vcpus", "1", "--ram", "128", "--property", "hw:cpu_policy=shared",
		"-o", "value", "-c", "name", "-c", "extra_specs"); out != "small-ssd\nhw:cpu_policy=shared\n" {
		t.Errorf("flavor create = %q", out)
	}
	mustBerth(t, "flavor", "delete", "small-ssd")

	// An ambiguous name is an error listing the ids.
	a := strings.TrimSpace(mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--name", "twin", "-o", "value", "-c", "id"))
	b := strings.TrimSpace(mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--name", "twin", "-o", "value", "-c", "id"))
	code, _, errs := berth("server", "show", "twin")
	if code != exitFailure || !strings.Contains(errs, `2 servers are named "twin", give an id`) || !strings.Contains(errs, a) || !strings.Contains(errs, b) {
		t.Errorf("server show twin: exit %d, %q", code, errs)
	}

	// A bulk delete tries every operand and sums up.
	code, _, errs = berth("server", "delete", "web-1", "nope", "web-2", "twin", "--wait", "--interval", "100ms")
	for _, want := range []string{`delete nope: no server named or with id "nope"`, `delete twin: 2 servers are named "twin"`,
		"berth server delete: 2 of 4 failed: nope twin"} {
		if !strings.Contains(errs, want) {
			t.Errorf("bulk delete's stderr lacks %q:\n%s", want, errs)
		}
	}
	if code != exitFailure {
		t.Errorf("bulk delete with one missing and one ambiguous: exit %d, want %d", code, exitFailure)
	}
	if got := lines(mustBerth(t, "server", "list", "-o", "value", "-c", "name")); !slices.Equal(got, []string{"member", "twin", "twin", "web-3"}) {
		t.Errorf("after the bulk delete: %q, want web-1 and web-2 gone", got)
	}
	if code, _, _ := berth("server", "delete", "nope1", "nope2"); code != exitNotFound {
		t.Errorf("delete of two missing servers: exit %d, want %d", code, exitNotFound)
	}
}

// TestCLIKeystoneCloudsYAML logs in as the openstack CLI does, through a
// clouds.yaml naming Berth's identity endpoint, and finds compute and
// image in the token's catalog; projects see their own servers only.
func TestCLIKeystoneCloudsYAML(t *testing.T) {
	st := startCLIStack(t, configs.AuthKeystone)
	clouds := writeFile(t, "clouds.yaml", `clouds:
  admin:
    auth:
      auth_url: `+st.identity+`
      username: `+configs.DevAdminUser+`
      password: `+configs.DevAdminPassword+`
      project_name: `+configs.DevAdminProject+`
      user_domain_name: Default
      project_domain_name: Default
  demo:
    auth:
      auth_url: `+st.identity+`
      username: `+demoUser+`
      password: `+demoPassword+`
      project_name: demo
      user_domain_name: Default
      project_domain_name: Default
  wrong:
    auth:
      auth_url: `+st.identity+`
      username: `+demoUser+`
      password: not-it
      project_name: demo
      user_domain_name: Default
      project_domain_name: Default
`)
	cleanEnv(t, "OS_CLIENT_CONFIG_FILE", clouds, "OS_CLOUD", "admin")

	if out := mustBerth(t, "image", "list", "-o", "value", "-c", "name"); !slices.Equal(lines(out), []string{"berth-fake", "berth-sleep"}) {
		t.Errorf("image list from the catalog's image endpoint = %q", out)
	}
	mustBerth(t, "--os-cloud", "demo", "server", "create", "--flavor", "m1.tiny", "--image", "berth-fake", "--name", "mine", "--wait", "--interval", "100ms")
	mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--name", "admins", "--wait", "--interval", "100ms")
	if got := lines(mustBerth(t, "server", "list", "-o", "value", "-c", "name")); !slices.Equal(got, []string{"admins"}) {
		t.Errorf("admin's own servers = %q", got)
	}
	if got := lines(mustBerth(t, "server", "list", "--all-projects", "-o", "value", "-c", "name")); !slices.Equal(got, []string{"admins", "mine"}) {
		t.Errorf("every project's servers = %q", got)
	}
	if got := lines(mustBerth(t, "server", "list", "--os-cloud", "demo", "-o", "value", "-c", "name")); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("demo's servers = %q", got)
	}
	// A member may not list services (admin only): Nova's 403.
	if code, _, errs := berth("service", "list", "--os-cloud", "demo"); code != exitFailure || !strings.Contains(errs, "403") {
		t.Errorf("demo's service list: exit %d, %q; want 1 and a 403", code, errs)
	}
	if code, _, errs := berth("server", "list", "--os-cloud", "wrong"); code != exitFailure || !strings.Contains(errs, "401") {
		t.Errorf("wrong password: exit %d, %q; want 1 and a 401", code, errs)
	}
	// The openrc form of the same login.
	cleanEnv(t, "OS_AUTH_URL", st.identity, "OS_USERNAME", demoUser, "OS_PASSWORD", demoPassword, "OS_PROJECT_NAME", "demo",
		"OS_USER_DOMAIN_NAME", "Default", "OS_PROJECT_DOMAIN_NAME", "Default")
	if got := lines(mustBerth(t, "server", "list", "-o", "value", "-c", "name")); !slices.Equal(got, []string{"mine"}) {
		t.Errorf("demo's servers with OS_* variables = %q", got)
	}
	// Without credentials, the keystone-mode API refuses noauth's token.
	cleanEnv(t, "BERTH_API", st.compute)
	if code, _, errs := berth("server", "list"); code != exitFailure || !strings.Contains(errs, "401") {
		t.Errorf("no credentials against keystone mode: exit %d, %q", code, errs)
	}
}

// TestCLIFixedEndpointCloudsYAML: clouds with keystoneauth's "none" and
// "admin_token" plugins, which name their endpoint instead of a
// Keystone, reach the compute API as the openstack CLI does: none as
// noauth2's user "notused" (its token), admin_token with its token. The
// real openstack CLI, given the same clouds.yaml, sees the same servers.
func TestCLIFixedEndpointCloudsYAML(t *testing.T) {
	st := startCLIStack(t, configs.AuthNoAuth)
	clouds := writeFile(t, "clouds.yaml", `clouds:
  none:
    auth_type: none
    endpoint: `+st.compute+`/v2.1
  none-in-auth:
    auth_type: none
    auth:
      endpoint: `+st.compute+`
  admin:
    auth_type: admin_token
    auth:
      endpoint: `+st.compute+`/v2.1
      token: admin:admin
    image_endpoint_override: `+st.image+`
  nowhere:
    auth_type: none
`)
	cleanEnv(t, "OS_CLIENT_CONFIG_FILE", clouds)

	mustBerth(t, "--os-cloud", "none", "server", "create", "--flavor", "m1.tiny", "--name", "nobodys", "--wait", "--interval", "100ms")
	mustBerth(t, "--os-cloud", "admin", "server", "create", "--flavor", "m1.tiny", "--name", "admins", "--wait", "--interval", "100ms")
	for cloud, want := range map[string][]string{"none": {"nobodys"}, "none-in-auth": {"nobodys"}, "admin": {"admins"}} {
		if got := lines(mustBerth(t, "--os-cloud", cloud, "server", "list", "-o", "value", "-c", "name")); !slices.Equal(got, want) {
			t.Errorf("cloud %s's servers = %q, want %q", cloud, got, want)
		}
	}
	if got := mustBerth(t, "--os-cloud", "none", "server", "show", "nobodys", "-o", "value", "-c", "project_id"); got != "notused\n" {
		t.Errorf("the none cloud's server is in project %q, want notused (the none plugin's token)", got)
	}
	// none is a user, not an admin: Nova's 403 on an admin's list.
	if code, _, errs := berth("--os-cloud", "none", "service", "list"); code != exitFailure || !strings.Contains(errs, "403") {
		t.Errorf("none's service list: exit %d, %q; want 1 and a 403", code, errs)
	}
	mustBerth(t, "--os-cloud", "admin", "service", "list")
	// The image API is called at image_endpoint_override (dev's checks
	// Keystone tokens, so noauth2's is refused there: 401).
	if code, _, errs := berth("--os-cloud", "admin", "image", "list"); code != exitFailure || !strings.Contains(errs, st.image+"/v2/images") || !strings.Contains(errs, "401") {
		t.Errorf("image list of the admin cloud: exit %d, %q; want its image_endpoint_override called", code, errs)
	}
	if code, _, errs := berth("--os-cloud", "none", "image", "list"); code == 0 || !strings.Contains(errs, "image_endpoint_override") {
		t.Errorf("image list of a cloud without an image endpoint: exit %d, %q; want the fix said", code, errs)
	}
	if code, _, errs := berth("--os-cloud", "nowhere", "server", "list"); code == 0 || !strings.Contains(errs, `cloud "nowhere" has auth_type none but no endpoint`) {
		t.Errorf("a none cloud without an endpoint: exit %d, %q", code, errs)
	}

	// The openstack CLI with the same file and cloud: the same servers.
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("the openstack CLI is not installed (apt-get install python3-openstackclient): not compared with it")
	}
	for cloud, want := range map[string]string{"none": "nobodys\n", "admin": "admins\n"} {
		cmd := exec.Command(osc, "--os-cloud", cloud, "server", "list", "-f", "value", "-c", "Name")
		cmd.Env = []string{"OS_CLIENT_CONFIG_FILE=" + clouds, "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
		out, err := cmd.Output()
		if err != nil || string(out) != want {
			t.Errorf("openstack --os-cloud %s server list: %q, %v; want %q as berth sees", cloud, out, err, want)
		}
	}
}
