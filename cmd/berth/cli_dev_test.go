package main

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/berth-project/berth/configs"
)

// TestDevSettingsFileWinsOverFlagDefaults: what a -config file sets wins
// over the flags' defaults; a flag given on the command line wins over
// the file; what neither sets is the flag's default.
func TestDevSettingsFileWinsOverFlagDefaults(t *testing.T) {
	path := writeFile(t, "dev.hcl", `etcd {
  embedded {
    data_dir   = "/srv/berth-dev/etcd"
    client_url = "http://127.0.0.1:12379"
  }
}
api {
  bind = "127.0.0.1:18774"
}
placement {
  bind = "127.0.0.1:18778"
}
`)
	for _, tc := range []struct {
		desc    string
		args    []string
		want    map[string]string // what → addr
		from    map[string]string // what → source
		dataDir bool
	}{
		{desc: "the file's values over the defaults", args: []string{"--config", path},
			want:    map[string]string{"etcd": "127.0.0.1:12379", "compute API": "127.0.0.1:18774", "Placement API": "127.0.0.1:18778", "image API": "127.0.0.1:9292"},
			from:    map[string]string{"etcd": path, "compute API": path, "image API": "--image"},
			dataDir: true},
		{desc: "flags given over the file", args: []string{"--config", path, "--api", "127.0.0.1:28774", "-data-dir", "/tmp/x"},
			want: map[string]string{"etcd": "127.0.0.1:12379", "compute API": "127.0.0.1:28774", "Placement API": "127.0.0.1:18778"},
			from: map[string]string{"compute API": "--api", "Placement API": path}},
		{desc: "no file: the flags", args: []string{"--placement", "127.0.0.1:38778"},
			want: map[string]string{"etcd": "127.0.0.1:2379", "compute API": "127.0.0.1:8774", "Placement API": "127.0.0.1:38778"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, f := devCommand(&streams{})
			if err := c.ParseFlags(longSingleDash(c, tc.args)); err != nil {
				t.Fatal(err)
			}
			cfg := configs.Defaults()
			if f.cfgPath != "" {
				var err error
				if cfg, err = configs.Load(f.cfgPath); err != nil {
					t.Fatal(err)
				}
			}
			cfg.EnableAllRoles()
			if cfg.Etcd.Embedded == nil {
				cfg.Etcd.Embedded = configs.Defaults().Etcd.Embedded
			}
			cfg.Image = configs.DefaultImage()
			addrs, _, dataDirFromFile := devSettings(cfg, f)
			got, from := map[string]string{}, map[string]string{}
			for _, a := range addrs {
				got[a.what], from[a.what] = a.addr, a.from
			}
			for what, want := range tc.want {
				if got[what] != want {
					t.Errorf("%s = %s, want %s", what, got[what], want)
				}
			}
			for what, want := range tc.from {
				if from[what] != want {
					t.Errorf("%s from %s, want %s", what, from[what], want)
				}
			}
			if dataDirFromFile != tc.dataDir || (tc.dataDir && cfg.Etcd.Embedded.DataDir != "/srv/berth-dev/etcd") {
				t.Errorf("data dir from the file %v (%s), want %v", dataDirFromFile, cfg.Etcd.Embedded.DataDir, tc.dataDir)
			}
			if cfg.API.Bind != got["compute API"] || "http://"+got["etcd"] != cfg.Etcd.Embedded.ClientURL {
				t.Errorf("config not set: api %s, etcd %s", cfg.API.Bind, cfg.Etcd.Embedded.ClientURL)
			}
		})
	}
}

// TestDevPortInUse: an address in use stops dev before it starts, naming
// the address and the flag that moves it.
func TestDevPortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	args := []string{"dev", "-etcd", free(), "-etcd-peer", free(), "-placement", free(), "-identity", free(), "-image", free(),
		"-api", busy.Addr().String()}
	code, _, errs := berth(args...)
	want := fmt.Sprintf("berth dev: the compute API address %s is in use (another berth dev?): move it with --api ADDR", busy.Addr())
	if code != exitFailure || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, errs, want)
	}
}

// TestDevLogFormat: --log-format json makes dev's logger write one JSON
// object a line (internal/logging's test checks the lines); another value
// is a usage error that names it.
func TestDevLogFormat(t *testing.T) {
	if code, _, errs := berth("dev", "--log-format", "xml"); code != exitUsage || !strings.Contains(errs, `--log-format "xml": want text or json`) {
		t.Errorf("--log-format xml: exit %d, stderr %q; want 2 and the value named", code, errs)
	}
	cfg := configs.Defaults()
	if err := devLogSettings(cfg, "debug", "json"); err != nil || cfg.Log.Format != configs.LogFormatJSON || cfg.Log.Level != "debug" {
		t.Errorf("devLogSettings(debug, json): %v, log %+v", err, cfg.Log)
	}
	cfg = configs.Defaults()
	cfg.Log.Format = configs.LogFormatJSON // as a -config file sets it
	if err := devLogSettings(cfg, "", ""); err != nil || cfg.Log.Format != configs.LogFormatJSON {
		t.Errorf("no flags: %v, log %+v; want the file's json kept", err, cfg.Log)
	}
}
