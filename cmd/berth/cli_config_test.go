package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-project/berth/configs"
)

func TestConfigRenderWritesAValidFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "agent.hcl")
	var stdout, stderr bytes.Buffer
	code := run([]string{"config", "render", "agent", "-name", "node3", "-address", "192.0.2.13",
		"-etcd", "node1=192.0.2.11,node2=192.0.2.12,node3=192.0.2.13", "-cell", "cell2",
		"-var", "driver=fake", "-var", "build_time=2s", "-o", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	cfg, err := configs.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Require(configs.RoleAgent); err != nil {
		t.Fatal(err)
	}
	if cfg.Agent.Host != "node3" || cfg.Agent.Cell != "cell2" || cfg.Agent.Fake.BuildTime.String() != "2s" {
		t.Errorf("agent = %+v", cfg.Agent)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, %v; want 0640 (configs may hold tokens)", st.Mode(), err)
	}
}

func TestConfigRenderErrors(t *testing.T) {
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"config", "render"}, 2, "missing ROLE"},
		{[]string{"config", "render", "agent", "-name", "n1", "-etcd", "n1=192.0.2.1"}, 2, "-address is required"},
		{[]string{"config", "render", "agent", "-name", "n1", "-address", "192.0.2.1", "-etcd", "n1"}, 2, `want name=address`},
		{[]string{"config", "render", "agent", "-name", "n1", "-address", "192.0.2.1", "-etcd", "n1=192.0.2.1", "-cell", "c", "-var", "vcpus=many"}, 1, "vcpus"},
		{[]string{"config", "render", "agent", "-name", "n1", "-address", "192.0.2.1", "-etcd", "n1=192.0.2.1", "-var", "vcpus=1", "-var", "vcpus=2"}, 2, "vcpus is set twice"},
		{[]string{"config", "render", "server", "-name", "n1", "-address", "192.0.2.1", "-etcd", "n1=192.0.2.1"}, 1, "identity admin's password hash"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, &stdout, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
}
