package backup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtest"
)

// TestSaveRestoreRoundTrip saves a member's state, restores it into a new
// data dir, starts a member there and finds every key.
func TestSaveRestoreRoundTrip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := etcdtest.Start(t)
	want := map[string]string{}
	for i := 0; i < 50; i++ {
		k, v := fmt.Sprintf("/berth/k%02d", i), fmt.Sprintf("v%d", i)
		want[k] = v
		if _, err := srv.Client().Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "berth.snap")
	info, err := Save(ctx, clientv3.Config{Endpoints: []string{srv.ClientURL()}, DialTimeout: 5 * time.Second}, out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Keys < len(want) || info.Revision < int64(len(want)) || info.Size == 0 {
		t.Fatalf("info = %+v, want at least %d keys and revision %d", info, len(want), len(want))
	}
	again, err := Status(out)
	if err != nil || again != info {
		t.Fatalf("Status = %+v, %v; Save said %+v", again, err, info)
	}
	if left, _ := filepath.Glob(out + ".part-*"); len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}

	peer := fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(t))
	dir := filepath.Join(t.TempDir(), "restored")
	if err := Restore(out, Member{Name: "new-1", DataDir: dir, PeerURL: peer}); err != nil {
		t.Fatal(err)
	}
	restored := etcdtest.StartWith(t, func(c *embedetcd.Config) {
		c.Name, c.DataDir, c.PeerURL = "new-1", dir, peer
	})
	resp, err := restored.Client().Get(ctx, "/berth/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	if len(got) != len(want) {
		t.Fatalf("restored %d keys, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// The restored member takes writes: it is a working cluster of one.
	if _, err := restored.Client().Put(ctx, "/berth/after", "x"); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreRefuses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := etcdtest.Start(t)
	snap := filepath.Join(t.TempDir(), "s.snap")
	if _, err := SaveFrom(ctx, srv.Client(), snap); err != nil {
		t.Fatal(err)
	}
	used := t.TempDir()
	if err := os.WriteFile(filepath.Join(used, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage.snap")
	if err := os.WriteFile(garbage, []byte("not a bolt database"), 0o600); err != nil {
		t.Fatal(err)
	}
	peer := "http://127.0.0.1:1"
	for _, tc := range []struct {
		name, snap string
		m          Member
		want       string
	}{
		{"non-empty data dir", snap, Member{DataDir: used, PeerURL: peer}, "not empty"},
		{"no peer URL", snap, Member{DataDir: filepath.Join(t.TempDir(), "d")}, "peer URL"},
		{"not a snapshot", garbage, Member{DataDir: filepath.Join(t.TempDir(), "d"), PeerURL: peer}, "snapshot status"},
		{"missing snapshot", garbage + ".nope", Member{DataDir: filepath.Join(t.TempDir(), "d"), PeerURL: peer}, "no such file"},
		{"member not in initial cluster", snap, Member{Name: "a", DataDir: filepath.Join(t.TempDir(), "d"), PeerURL: peer, InitialCluster: "b=http://127.0.0.1:2"}, "snapshot restore into"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Restore(tc.snap, tc.m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Restore = %v, want an error with %q", err, tc.want)
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(used, "keep")); err != nil || string(b) != "x" {
		t.Fatalf("the used data dir was touched: %q, %v", b, err)
	}
}

// TestSaveLeavesNothingOnFailure: a save that cannot finish leaves no
// file at out and no temp file beside it.
func TestSaveLeavesNothingOnFailure(t *testing.T) {
	srv := etcdtest.Start(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "s.snap")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := SaveFrom(ctx, srv.Client(), out); err == nil {
		t.Fatal("SaveFrom with a cancelled context succeeded")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
	if _, err := SaveFrom(context.Background(), srv.Client(), filepath.Join(dir, "missing", "s.snap")); err == nil {
		t.Fatal("SaveFrom into a missing directory succeeded")
	}
}
