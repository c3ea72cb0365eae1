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

	"github.com/berth-project/berth/internal/etcdtest"
)

// TestEtcdAuthCommand: berth etcd-auth makes a user per machine with its
// roles and turns auth on, after which an anonymous client is refused.
func TestEtcdAuthCommand(t *testing.T) {
	srv := etcdtest.Start(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "admin.hcl")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("etcd {\n  endpoints = [%q]\n}\n", srv.ClientURL())), 0o600); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(dir, "root-pw")
	if err := os.WriteFile(pw, []byte("root-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"etcd-auth", "-config", conf, "-root-password-file", pw, "-server", "ctl-1",
		"-conductor", "ctl-1=cell1", "-agent", "compute-1=cell1", "-member", "etcd-1"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"compute-1: berth-agent-compute-1\n", "ctl-1: berth-server, root, berth-conductor-cell1\n", "etcd-1: berth-member\n", "etcd auth enabled\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// The member's in-process client has no certificate here (no TLS):
	// anonymous, refused once auth is on.
	if _, err := srv.Client().Get(ctx, "/berth/flavors/"); err == nil || !strings.Contains(err.Error(), "user name is empty") {
		t.Errorf("anonymous read after etcd-auth: %v, want refused", err)
	}
	for _, args := range [][]string{{"etcd-auth"}, {"etcd-auth", "-config", conf}, {"etcd-auth", "-config", conf, "-agent", "compute-1"}} {
		if code := run(args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}
