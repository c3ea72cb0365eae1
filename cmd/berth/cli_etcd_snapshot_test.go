package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtest"
)

// TestEtcdSnapshotCommands: save from a config's cluster, status of the
// file, restore into a member named by a config, and the refusals.
func TestEtcdSnapshotCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := etcdtest.Start(t)
	if _, err := srv.Client().Put(ctx, "/berth/flavors/f1", "tiny"); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	admin := filepath.Join(dir, "admin.hcl")
	writeConf(t, admin, fmt.Sprintf("etcd {\n  endpoints = [%q]\n}\n", srv.ClientURL()))
	snap := filepath.Join(dir, "berth.snap")

	var out, errb bytes.Buffer
	if code := run([]string{"etcd", "snapshot", "save", "--config", admin, snap}, &out, &errb); code != 0 {
		t.Fatalf("save: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "saved "+snap) || !strings.Contains(out.String(), "revision ") {
		t.Errorf("save printed %q", out.String())
	}
	out.Reset()
	if code := run([]string{"etcd", "snapshot", "status", snap}, &out, &errb); code != 0 || !strings.Contains(out.String(), "hash ") {
		t.Fatalf("status: exit %d: %q %s", code, out.String(), errb.String())
	}

	peer := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	data := filepath.Join(dir, "new-data")
	member := filepath.Join(dir, "member.hcl")
	writeConf(t, member, fmt.Sprintf("etcd {\n  embedded {\n    name = \"new-1\"\n    data_dir = %q\n    client_url = \"http://127.0.0.1:%d\"\n    peer_url = %q\n  }\n}\n", data, etcdtest.FreePort(t), peer))
	out.Reset()
	if code := run([]string{"etcd", "snapshot", "restore", snap, "--config", member}, &out, &errb); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, errb.String())
	}
	restored := etcdtest.StartWith(t, func(c *embedetcd.Config) { c.Name, c.DataDir, c.PeerURL = "new-1", data, peer })
	resp, err := restored.Client().Get(ctx, "/berth/flavors/f1")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "tiny" {
		t.Fatalf("restored member: %v, %v", resp, err)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"etcd", "snapshot", "restore", snap, "--config", member}, 1, "not empty"},
		{[]string{"etcd", "snapshot", "restore", snap}, 2, "name the member"},
		{[]string{"etcd", "snapshot", "restore", snap, "--config", admin}, 2, "no embedded etcd member"},
		{[]string{"etcd", "snapshot", "save", snap}, 2, "--config is required"},
		{[]string{"etcd", "snapshot", "status", admin}, 1, "snapshot status"},
	} {
		errb.Reset()
		if code := run(tc.args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d %q, want %d with %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
	}
}

func writeConf(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
