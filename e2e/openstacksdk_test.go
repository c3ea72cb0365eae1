package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// sdkPython is Debian's interpreter, the one python3-openstacksdk is
// installed for (a python3 earlier on PATH may lack it).
const sdkPython = "/usr/bin/python3"

// TestOpenStackSDKDrivesBerth runs openstacksdk (Debian's 0.101), the
// Python SDK under Ansible's openstack.cloud and many tools, against a
// real `berth dev` through a clouds.yaml that names only the identity
// endpoint and dev's printed login: the SDK finds compute and image in
// the catalog, builds a server with networks "none", waits for ACTIVE,
// deletes it and waits until it is gone, and lists services, aggregates
// and images. The script (testdata/openstacksdk_drive.py) prints what it
// saw as JSON; this test judges it.
func TestOpenStackSDKDrivesBerth(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: starts real processes")
	}
	if err := exec.Command(sdkPython, "-c", "import openstack").Run(); err != nil {
		t.Skip("openstacksdk not installed (Debian: apt-get install python3-openstacksdk)")
	}
	dev := startSDKDev(t, 2)

	home := t.TempDir()
	clouds := writeFile(t, home, "clouds.yaml", fmt.Sprintf(`clouds:
  berth:
    identity_api_version: 3
    auth:
      auth_url: %s
      username: %s
      password: %s
      project_name: %s
      user_domain_name: Default
      project_domain_name: Default
`, dev.identityURL, sdkUser, sdkPassword, sdkProject))
	script, err := filepath.Abs(filepath.Join("testdata", "openstacksdk_drive.py"))
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, sdkPython, script, "berth-sleep", "m1.tiny")
	// A private HOME and no OS_* variables: only our clouds.yaml counts.
	cmd.Env = []string{"HOME=" + home, "LANG=C.UTF-8", "OS_CLIENT_CONFIG_FILE=" + clouds}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PATH=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("openstacksdk script: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}

	var got struct {
		Flavors []string `json:"flavors"`
		ImageID string   `json:"image_id"`
		Images  []string `json:"images"`
		Server  struct {
			ID, Name, Status, Host string
			ImageID                string `json:"image_id"`
			FlavorName             string `json:"flavor_name"`
		} `json:"server"`
		Servers []struct {
			ID, Name, Status string
		} `json:"servers"`
		ServersAfterDelete []string `json:"servers_after_delete"`
		Services           []struct {
			Binary, Host, State, Status string
		} `json:"services"`
		Aggregates []struct {
			Name             string   `json:"name"`
			AvailabilityZone string   `json:"availability_zone"`
			Hosts            []string `json:"hosts"`
		} `json:"aggregates"`
		AggregatesAfterDelete []string `json:"aggregates_after_delete"`
	}
	if stderr.Len() > 0 {
		t.Logf("openstacksdk stderr:\n%s", stderr.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatalf("script printed no JSON: %v\n%s\nstderr: %s", err, stdout.String(), stderr.String())
	}

	if !slices.Contains(got.Flavors, "m1.tiny") {
		t.Errorf("flavors = %v, want m1.tiny among them", got.Flavors)
	}
	if !slices.Contains(got.Images, "berth-sleep") || !slices.Contains(got.Images, "berth-fake") {
		t.Errorf("images = %v, want berth-sleep and berth-fake", got.Images)
	}
	s := got.Server
	if s.ID == "" || s.Name != "sdk-server" || s.Status != "ACTIVE" || s.ImageID == "" || s.ImageID != got.ImageID ||
		s.FlavorName != "m1.tiny" || !strings.HasPrefix(s.Host, "compute-") {
		t.Errorf("server after wait_for_server = %+v", s)
	}
	if len(got.Servers) != 1 || got.Servers[0].ID != s.ID || got.Servers[0].Name != "sdk-server" || got.Servers[0].Status != "ACTIVE" {
		t.Errorf("servers() = %+v, want just sdk-server, ACTIVE", got.Servers)
	}
	if len(got.ServersAfterDelete) != 0 {
		t.Errorf("servers() after wait_for_delete = %v, want none", got.ServersAfterDelete)
	}
	// Like Nova, os-services lists conductors too; the compute services
	// are one per host, each up and enabled.
	var computeHosts []string
	for _, svc := range got.Services {
		if svc.State != "up" || svc.Status != "enabled" {
			t.Errorf("service %+v: want up, enabled", svc)
		}
		if svc.Binary == "nova-compute" {
			computeHosts = append(computeHosts, svc.Host)
		}
	}
	slices.Sort(computeHosts)
	if want := []string{"compute-1", "compute-2"}; !slices.Equal(computeHosts, want) {
		t.Errorf("nova-compute services on %v, want %v (all: %+v)", computeHosts, want, got.Services)
	}
	if len(got.Aggregates) != 1 || got.Aggregates[0].Name != "sdk-agg" || got.Aggregates[0].AvailabilityZone != "sdk-az" ||
		!slices.Equal(got.Aggregates[0].Hosts, []string{"compute-1"}) {
		t.Errorf("aggregates() = %+v, want sdk-agg in sdk-az with compute-1", got.Aggregates)
	}
	if len(got.AggregatesAfterDelete) != 0 {
		t.Errorf("aggregates() after delete = %v, want none", got.AggregatesAfterDelete)
	}
}
