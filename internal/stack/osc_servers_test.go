package stack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/compute"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/etcdtest"
)

// oscImages is the test's image catalog: the seam the image service
// fills in a deployment.
type oscImages map[string]compute.Image

func (c oscImages) Image(_ context.Context, id string) (compute.Image, error) {
	im, ok := c[id]
	if !ok {
		return compute.Image{}, compute.ErrImageNotFound
	}
	return im, nil
}

// glanceStandIn answers what the openstack CLI asks of the image service
// to resolve --image: the version document and an image by id or name,
// in Glance v2's shapes, from the same catalog the compute API uses.
func glanceStandIn(t *testing.T, images oscImages) *httptest.Server {
	var srv *httptest.Server
	view := func(im compute.Image) map[string]any {
		return map[string]any{"id": im.ID, "name": im.Name, "status": "active", "visibility": "public",
			"min_ram": im.MinRAMMB, "min_disk": im.MinDiskGB, "container_format": "bare", "disk_format": "raw",
			"created_at": "2026-11-26T10:00:00Z", "updated_at": "2026-11-26T10:00:00Z", "tags": []string{},
			"self": "/v2/images/" + im.ID, "file": "/v2/images/" + im.ID + "/file", "schema": "/v2/schemas/image"}
	}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		p := strings.TrimSuffix(r.URL.Path, "/")
		switch {
		case p == "/v2/images":
			out := []map[string]any{}
			for _, im := range images {
				if name := r.URL.Query().Get("name"); name == "" || name == im.Name {
					out = append(out, view(im))
				}
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"images": out})
		case strings.HasPrefix(p, "/v2/images/"):
			im, ok := images[strings.TrimPrefix(p, "/v2/images/")]
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(`{"message": "not found"}`))
				return
			}
			_ = json.NewEncoder(w).Encode(view(im))
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"versions": []map[string]any{{"id": "v2.16", "status": "CURRENT",
				"links": []map[string]string{{"rel": "self", "href": srv.URL + "/v2/"}}}}})
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestOpenStackCLIServers drives the real `openstack` CLI (Debian's
// python3-openstackclient) through a server's life against a dev stack
// (server roles, a cell conductor, two simulated hosts): create with an
// image and --wait, list, show, delete with --wait. No token is checked
// yet (keystoneauth's "none" plugin); the image service is a stand-in
// over the in-test catalog until the image service is merged.
func TestOpenStackCLIServers(t *testing.T) {
	osc, err := exec.LookPath("openstack")
	if err != nil {
		t.Skip("the openstack CLI is not installed (apt-get install python3-openstackclient)")
	}
	const imageID = "7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f60"
	images := oscImages{imageID: {ID: imageID, Name: "sleeper", Command: []string{"sleep", "600"}}}
	cfg := configs.Defaults()
	cfg.EnableAllRoles()
	cfg.Etcd.Embedded = nil
	cfg.API.Bind, cfg.Placement.Bind, cfg.Scheduler.Bind = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	s := New(cfg, hclog.NewNullLogger())
	s.Attach(etcdtest.Client(t))
	s.SetImages(images)
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := Dev(DevOptions{Hosts: 2, Cells: 1, DataDir: t.TempDir()})(ctx, s); err != nil {
		t.Fatalf("start dev: %v", err)
	}
	glance := glanceStandIn(t, images)
	dir := t.TempDir()
	clouds := "clouds:\n  berth:\n    auth_type: none\n    auth:\n      endpoint: " + s.Endpoint("compute API") + "/v2.1\n" +
		"    compute_endpoint_override: " + s.Endpoint("compute API") + "/v2.1\n" +
		"    image_endpoint_override: " + glance.URL + "/v2\n"
	if err := os.WriteFile(filepath.Join(dir, "clouds.yaml"), []byte(clouds), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, osc, append([]string{"--os-cloud", "berth", "--os-compute-api-version", "2.latest"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "OS_CLIENT_CONFIG_FILE="+filepath.Join(dir, "clouds.yaml"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	var created map[string]any
	if err := json.Unmarshal([]byte(run("server", "create", "--flavor", "m1.tiny", "--image", imageID, "--network", "none",
		"--wait", "-f", "json", "web-1")), &created); err != nil {
		t.Fatal(err)
	}
	if created["status"] != "ACTIVE" || created["name"] != "web-1" {
		t.Errorf("server create --wait: %v", created)
	}
	id, _ := created["id"].(string)
	var list []map[string]any
	if err := json.Unmarshal([]byte(run("server", "list", "-f", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0]["ID"] != id || list[0]["Status"] != "ACTIVE" || list[0]["Flavor"] != "m1.tiny" {
		t.Errorf("server list: %v", list)
	}
	var show map[string]any
	if err := json.Unmarshal([]byte(run("server", "show", "-f", "json", id)), &show); err != nil {
		t.Fatal(err)
	}
	host, _ := show["OS-EXT-SRV-ATTR:host"].(string)
	if show["status"] != "ACTIVE" || !strings.HasPrefix(host, "compute-") || !strings.Contains(show["image"].(string), imageID) {
		t.Errorf("server show: %v", show)
	}
	run("server", "delete", "--wait", id)
	if out := run("server", "list", "-f", "value", "-c", "ID"); strings.TrimSpace(out) != "" {
		t.Errorf("server list after delete: %q", out)
	}
}
