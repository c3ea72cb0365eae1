package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/images"
	"github.com/berth-project/berth/internal/etcdtest"
)

// imageHCL is a server with the compute API, identity and the image API;
// both users' hash is of "alice-pw" at bcrypt's minimum cost. The image
// endpoint of the catalog is the image API's own port.
const imageHCL = `
etcd {
  prefix = "/images-test"
}
api {
  bind = "127.0.0.1:0"
}
identity {
  bind = "127.0.0.1:0"
  user "alice" {
    password_hash = "$2a$04$lor8NbSq/K4dbN1L7kq6kuuilUyd5/.L8UYJWVkosBOggE7rHk8BK"
  }
  user "root" {
    password_hash = "$2a$04$lor8NbSq/K4dbN1L7kq6kuuilUyd5/.L8UYJWVkosBOggE7rHk8BK"
  }
  project "demo" {}
  project "ops" {}
  assignment {
    user    = "alice"
    project = "demo"
    role    = "member"
  }
  assignment {
    user    = "root"
    project = "ops"
    role    = "admin"
  }
  endpoint "image" {
    public = "http://%IMAGE%"
  }
}
image {
  bind = "%IMAGE%"
}
`

// TestImageAPIServedWithTokens starts `berth server` with an image block:
// the default images exist, the image API answers only with a token of
// the deployment's identity, and the openstack CLI, logging in through
// the identity API, finds the image endpoint in the catalog and lists
// and shows the images.
func TestImageAPIServedWithTokens(t *testing.T) {
	imageAddr := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	path := filepath.Join(t.TempDir(), "server.hcl")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(imageHCL, "%IMAGE%", imageAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := configs.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := New(cfg, hclog.NewNullLogger())
	s.Attach(etcdtest.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.StartServerRoles(ctx); err != nil {
		t.Fatalf("start server roles: %v", err)
	}
	t.Cleanup(s.Stop)
	imageURL, idURL := s.Endpoint("image"), s.Endpoint("identity")
	if imageURL != "http://"+imageAddr || idURL == "" {
		t.Fatalf("endpoints %v", s.Endpoints)
	}

	login := func(user, project string) string {
		body := `{"auth": {"identity": {"methods": ["password"], "password": {"user": {"name": "` + user +
			`", "domain": {"id": "default"}, "password": "alice-pw"}}}, "scope": {"project": {"name": "` + project + `", "domain": {"id": "default"}}}}}`
		resp, err := http.Post(idURL+"/v3/auth/tokens", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("X-Subject-Token")
	}
	get := func(token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, imageURL+"/v2/images?sort=name:asc", nil)
		if token != "" {
			req.Header.Set("X-Auth-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	if code, _ := get("forged"); code != http.StatusUnauthorized {
		t.Errorf("a forged token: %d", code)
	}
	code, body := get(login("alice", "demo"))
	if code != http.StatusOK || !strings.Contains(body, `"name": "berth-fake"`) || !strings.Contains(body, `"name": "berth-sleep"`) {
		t.Errorf("alice lists: %d %s", code, body)
	}

	osc, err := exec.LookPath("openstack")
	if err != nil || testing.Short() {
		t.Skip("the openstack CLI part needs python3-openstackclient and a long test run")
	}
	home := t.TempDir()
	clouds := "clouds:\n  berth:\n    auth:\n      auth_url: " + idURL + "/v3\n      username: root\n      password: alice-pw\n" +
		"      project_name: ops\n      user_domain_name: Default\n      project_domain_name: Default\n    region_name: RegionOne\n"
	cloudsPath := filepath.Join(home, "clouds.yaml")
	if err := os.WriteFile(cloudsPath, []byte(clouds), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, osc, append([]string{"--os-cloud", "berth"}, args...)...)
		cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "OS_CLIENT_CONFIG_FILE=" + cloudsPath}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("openstack %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	var show map[string]any
	if err := json.Unmarshal(run("image", "show", images.DefaultSleepImage, "-f", "json"), &show); err != nil {
		t.Fatal(err)
	}
	props, _ := json.Marshal(show["properties"])
	if show["id"] != images.DefaultID(images.DefaultSleepImage) || !strings.Contains(string(props), `\"sleep\",\"infinity\"`) {
		t.Errorf("image show: %v", show)
	}
}
