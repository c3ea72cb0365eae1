package images

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/crypto/bcrypt"

	"github.com/berth-project/berth/identity"
)

// TestOpenStackCLI drives the real `openstack` CLI (Debian's
// python3-openstackclient: openstacksdk underneath) through a
// clouds.yaml, as an operator would: it logs in to a real identity API,
// finds the image endpoint in the token's catalog, and lists, shows,
// creates (with a berth_command property), changes and deletes images.
// A member of another project lists the public images but may not
// create one.
func TestOpenStackCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the openstack CLI (seconds of Python start-up)")
	}
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("no openstack CLI (apt-get install python3-openstackclient)")
	}
	ctx := context.Background()
	store := newTestStore(t)
	if err := EnsureDefaults(ctx, store.cli, store.keys, Defaults(time.Now())); err != nil {
		t.Fatal(err)
	}
	// The image API's address goes into the identity catalog, so the
	// identity service is made after the listener.
	var api http.Handler
	var mu sync.Mutex
	var seen []string // method and path of each request, for failures
	imageSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Content-Type"))
		mu.Unlock()
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(imageSrv.Close)
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	svc, err := identity.New(identity.Config{
		Users:    []identity.User{{Name: "admin", PasswordHash: hash("admin-pw")}, {Name: "alice", PasswordHash: hash("alice-pw")}},
		Projects: []identity.Project{{Name: "ops"}, {Name: "demo"}},
		Assignments: []identity.Assignment{{User: "admin", Project: "ops", Role: identity.RoleAdmin},
			{User: "alice", Project: "demo", Role: identity.RoleMember}},
		Endpoints: []identity.Endpoint{{Type: "image", Public: imageSrv.URL, Internal: imageSrv.URL, Admin: imageSrv.URL}},
		Region:    "RegionOne", TokenTTL: time.Hour,
	}, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	api = NewAPI(store, hclog.NewNullLogger(), Options{Verifier: svc.Verifier()})
	idSrv := httptest.NewServer(identity.NewAPI(svc, hclog.NewNullLogger()))
	t.Cleanup(idSrv.Close)

	home := t.TempDir()
	var clouds strings.Builder
	clouds.WriteString("clouds:\n")
	for _, u := range []struct{ user, project string }{{"admin", "ops"}, {"alice", "demo"}} {
		clouds.WriteString("  " + u.user + ":\n    auth:\n      auth_url: " + idSrv.URL + "/v3\n      username: " + u.user +
			"\n      password: " + u.user + "-pw\n      project_name: " + u.project +
			"\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n    identity_api_version: 3\n")
	}
	cfgPath := filepath.Join(home, "clouds.yaml")
	if err := os.WriteFile(cfgPath, []byte(clouds.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(cloud string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, osc, append([]string{"--os-cloud", cloud}, args...)...)
		// Only this clouds.yaml, no OS_* from the environment. Stdin is
		// /dev/null, not a terminal, as in a script: image create then
		// uploads it (empty) after the create.
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "OS_CLIENT_CONFIG_FILE=" + cfgPath}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if err != nil {
			return o.String() + e.String(), err
		}
		return o.String(), nil
	}
	must := func(cloud string, args ...string) string {
		t.Helper()
		out, err := run(cloud, args...)
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("openstack %s: %v\n%s\nrequests: %s", strings.Join(args, " "), err, out, strings.Join(seen, "\n"))
		}
		return out
	}
	names := func(cloud string) string {
		var list []map[string]any
		if err := json.Unmarshal([]byte(must(cloud, "image", "list", "-f", "json")), &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, img := range list {
			out = append(out, img["Name"].(string))
		}
		return strings.Join(out, ",")
	}

	if got := names("admin"); got != "berth-fake,berth-sleep" {
		t.Errorf("image list: %s", got)
	}
	var show map[string]any
	if err := json.Unmarshal([]byte(must("admin", "image", "show", "berth-sleep", "-f", "json")), &show); err != nil {
		t.Fatal(err)
	}
	if show["id"] != DefaultID(DefaultSleepImage) || show["status"] != "active" || show["visibility"] != "public" ||
		!strings.Contains(string(mustJSON(t, show["properties"])), `berth_command`) {
		t.Errorf("image show berth-sleep: %v", show)
	}

	out := must("admin", "image", "create", "--public", "--min-ram", "64",
		"--property", `berth_command=["sleep", "3600"]`, "--tag", "berth", "sleeper", "-f", "json")
	var created map[string]any
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("image create printed %s: %v", out, err)
	}
	id, _ := created["id"].(string)
	img, err := store.Get(ctx, id)
	if err != nil || strings.Join(img.Command, " ") != "sleep 3600" || img.MinRAMMB != 64 || img.Visibility != "public" {
		t.Fatalf("image create stored %+v, %v (printed %s)", img, err, out)
	}
	if got := names("alice"); got != "berth-fake,berth-sleep,sleeper" {
		t.Errorf("alice's image list: %s", got)
	}
	if out, err := run("alice", "image", "create", "mine"); err == nil || !strings.Contains(out, "403") {
		t.Errorf("a member created an image: %v\n%s", err, out)
	}
	must("admin", "image", "set", "--property", `berth_command=["sleep", "7200"]`, "--protected", "sleeper")
	if img, err := store.Get(ctx, id); err != nil || strings.Join(img.Command, " ") != "sleep 7200" || !img.Protected {
		t.Errorf("image set stored %+v, %v", img, err)
	}
	if out, err := run("admin", "image", "delete", "sleeper"); err == nil {
		t.Errorf("a protected image was deleted: %s", out)
	}
	must("admin", "image", "set", "--unprotected", "sleeper")
	must("admin", "image", "delete", "sleeper")
	if got := names("admin"); got != "berth-fake,berth-sleep" {
		t.Errorf("image list after the delete: %s", got)
	}
	if out, err := run("admin", "image", "create", "--property", "berth_command=sleep 1", "bad"); err == nil ||
		!strings.Contains(out, "invalid berth_command") {
		t.Errorf("a bad berth_command: %v\n%s", err, out)
	}
	data := filepath.Join(home, "disk.img")
	if err := os.WriteFile(data, []byte("not a disk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run("admin", "image", "create", "--file", data, "disk"); err == nil ||
		!strings.Contains(out, "Berth stores no image data") {
		t.Errorf("an upload with data: %v\n%s", err, out)
	}
	if got := names("admin"); got != "berth-fake,berth-sleep" {
		t.Errorf("the refused upload left an image: %s", got)
	}

	// Past Glance's page of 25, the SDK follows the next links.
	for i := range 30 {
		if err := store.Create(ctx, testImage(fmt.Sprintf("many-%02d", i), i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Count(names("alice"), ",") + 1; got != 32 {
		t.Errorf("image list over pages: %d images, want 32", got)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
