package embedetcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/berth-project/berth/internal/logtest"
	"github.com/berth-project/berth/internal/testwait"
)

func bufferLogger(w *logtest.Buffer, level hclog.Level, json bool) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "berth", Output: w, Level: level, JSONFormat: json}).Named("etcd")
}

// TestZapCoreLevels sends one record at each zap level through a real
// zap.Logger on the core and checks which reach hclog, and at which level.
func TestZapCoreLevels(t *testing.T) {
	write := func(lg *zap.Logger) {
		lg.Debug("rec-debug")
		lg.Info("rec-info")
		lg.Warn("rec-warn")
		lg.Error("rec-error")
		lg.DPanic("rec-dpanic") // zap panics after writing only in development mode
	}
	for _, tc := range []struct {
		etcdLevel  string
		hclogLevel hclog.Level
		want       []string // "[LEVEL]  berth.etcd: message" lines, in order
	}{
		{"debug", hclog.Trace, []string{"[DEBUG] berth.etcd: rec-debug", "[INFO]  berth.etcd: rec-info", "[WARN]  berth.etcd: rec-warn", "[ERROR] berth.etcd: rec-error", "[ERROR] berth.etcd: rec-dpanic"}},
		{"info", hclog.Trace, []string{"[INFO]  berth.etcd: rec-info", "[WARN]  berth.etcd: rec-warn", "[ERROR] berth.etcd: rec-error", "[ERROR] berth.etcd: rec-dpanic"}},
		{"", hclog.Trace, []string{"[WARN]  berth.etcd: rec-warn", "[ERROR] berth.etcd: rec-error", "[ERROR] berth.etcd: rec-dpanic"}},
		{"warn", hclog.Trace, []string{"[WARN]  berth.etcd: rec-warn", "[ERROR] berth.etcd: rec-error", "[ERROR] berth.etcd: rec-dpanic"}},
		{"error", hclog.Trace, []string{"[ERROR] berth.etcd: rec-error", "[ERROR] berth.etcd: rec-dpanic"}},
		// Berth's own level still applies on top of etcd's.
		{"debug", hclog.Warn, []string{"[WARN]  berth.etcd: rec-warn", "[ERROR] berth.etcd: rec-error", "[ERROR] berth.etcd: rec-dpanic"}},
		{"info", hclog.Error, []string{"[ERROR] berth.etcd: rec-error", "[ERROR] berth.etcd: rec-dpanic"}},
	} {
		t.Run(fmt.Sprintf("etcd=%q,berth=%s", tc.etcdLevel, tc.hclogLevel), func(t *testing.T) {
			var buf logtest.Buffer
			lg, err := newZapLogger(bufferLogger(&buf, tc.hclogLevel, false), tc.etcdLevel, nil)
			if err != nil {
				t.Fatal(err)
			}
			write(lg)
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if line == "" {
					continue
				}
				// Drop hclog's timestamp: "2026-... [WARN]  berth.etcd: rec-warn".
				_, rest, ok := strings.Cut(line, " ")
				if !ok {
					t.Fatalf("line without a timestamp: %q", line)
				}
				got = append(got, rest)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestZapCoreFields checks zap fields become hclog key/value pairs, in
// text and JSON, with no caller and the zap logger name as one field.
func TestZapCoreFields(t *testing.T) {
	log := func(lg *zap.Logger) {
		lg.With(zap.String("local-member-id", "8e9e05c52164694d")).Named("raft").Warn("slow fdatasync",
			zap.Duration("took", 1500*time.Millisecond),
			zap.Duration("expected-duration", time.Second),
			zap.Int64("size", 4096),
			zap.Bool("ok", false),
			zap.Strings("peers", []string{"etcd-2", "etcd-3"}),
			zap.Error(errors.New("write wal: no space left on device")),
		)
	}
	t.Run("text", func(t *testing.T) {
		var buf logtest.Buffer
		lg, err := newZapLogger(bufferLogger(&buf, hclog.Info, false), "warn", nil)
		if err != nil {
			t.Fatal(err)
		}
		log(lg)
		out := buf.String()
		for _, want := range []string{
			"[WARN]  berth.etcd: slow fdatasync: local-member-id=8e9e05c52164694d took=1.5s expected-duration=1s size=4096 ok=false peers=[etcd-2, etcd-3] error=\"write wal: no space left on device\" zap_logger=raft\n",
		} {
			if !strings.HasSuffix(out, want) {
				t.Errorf("output %q does not end in %q", out, want)
			}
		}
		if strings.Contains(out, "caller") || strings.Contains(out, ".go:") {
			t.Errorf("output has etcd's caller: %q", out)
		}
		if strings.Count(out, "\n") != 1 {
			t.Errorf("want one line, got %q", out)
		}
	})
	t.Run("json", func(t *testing.T) {
		var buf logtest.Buffer
		lg, err := newZapLogger(bufferLogger(&buf, hclog.Info, true), "warn", nil)
		if err != nil {
			t.Fatal(err)
		}
		log(lg)
		out := buf.String()
		for _, want := range []string{
			`"@level":"warn"`, `"@message":"slow fdatasync"`, `"@module":"berth.etcd"`,
			`"local-member-id":"8e9e05c52164694d"`, `"took":"1.5s"`, `"size":4096`, `"ok":false`,
			`"peers":["etcd-2","etcd-3"]`, `"error":"write wal: no space left on device"`, `"zap_logger":"raft"`,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output %q lacks %s", out, want)
			}
		}
	})
}

func TestZapLoggerBadLevel(t *testing.T) {
	var buf logtest.Buffer
	_, err := newZapLogger(bufferLogger(&buf, hclog.Info, false), "verbose", nil)
	if err == nil || !strings.Contains(err.Error(), `log_level "verbose" is not one of debug, info, warn, error`) {
		t.Errorf("err = %v", err)
	}
	// A member refuses it before starting.
	_, err = Start(Config{DataDir: t.TempDir(), ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2",
		Logger: bufferLogger(&buf, hclog.Info, false), LogLevel: "verbose"})
	if err == nil || !strings.Contains(err.Error(), `embedded etcd: log_level "verbose"`) {
		t.Errorf("Start err = %v", err)
	}
}

// startLogged starts a real member whose etcd records go to buf at level.
func startLogged(t *testing.T, buf *logtest.Buffer, level string) *Server {
	t.Helper()
	srv, err := Start(Config{
		DataDir:   filepath.Join(t.TempDir(), "etcd"),
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", freePort(t)),
		Logger:    bufferLogger(buf, hclog.Trace, false),
		LogLevel:  level,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// TestMemberLogsAtInfo: a real member at info logs its start-up to the
// hclog logger, fields and all.
func TestMemberLogsAtInfo(t *testing.T) {
	var buf logtest.Buffer
	srv := startLogged(t, &buf, "info")
	// etcd logs this from the goroutine serving the client listener,
	// which may run a little after Start returns.
	want := "[INFO]  berth.etcd: serving client traffic insecurely; this is strongly discouraged!: traffic=\"grpc+http\" address=" +
		strings.TrimPrefix(srv.ClientURL(), "http://")
	testwait.Poll(t, 30*time.Second, fmt.Sprintf("%q in etcd's log", want), func() (bool, string) {
		return strings.Contains(buf.String(), want), "log:\n" + buf.String()
	})
	if out := buf.String(); !strings.Contains(out, "[INFO]  berth.etcd: ready to serve client requests") {
		t.Errorf("no ready line in:\n%s", out)
	}
}

// TestMemberQuietAtWarn: at warn (the default) a healthy member's
// start-up and shutdown log no info or debug line.
func TestMemberQuietAtWarn(t *testing.T) {
	var buf logtest.Buffer
	srv := startLogged(t, &buf, "warn")
	if err := srv.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Close returns only once etcd's serving goroutines have returned,
	// so every start-up record they would write has been written.
	srv.Close()
	out := buf.String()
	// Not every warning is ruled out: on a loaded machine etcd rightly
	// warns of slow applies. The advisories and the listeners closing are
	// always printed unless demoted.
	for _, bad := range []string{"[INFO]", "[DEBUG]", "ready to serve client requests",
		"single port", "simple token", "setting up serving from embedded etcd failed", "grpc server due to error"} {
		if strings.Contains(out, bad) {
			t.Errorf("etcd at warn logged %q:\n%s", bad, out)
		}
	}
	t.Logf("etcd at warn logged %d bytes: %q", len(out), out)
}

// TestZapCoreDemotes: etcd's advisories about Berth's own choices, and its
// listeners reporting they closed once Berth closes the member, are info;
// other warnings and errors keep their level, closing or not.
func TestZapCoreDemotes(t *testing.T) {
	closedErr := fmt.Errorf("accept tcp 127.0.0.1:2379: %w", net.ErrClosed)
	for _, tc := range []struct {
		name    string
		closing bool
		write   func(*zap.Logger)
		want    string // the line without its timestamp; "" = none at warn
	}{
		{"advisory", false, func(lg *zap.Logger) { lg.Warn("simple token is not cryptographically signed") }, ""},
		{"single port", false, func(lg *zap.Logger) {
			lg.Warn("Running http and grpc server on single port. This is not recommended for production.")
		}, ""},
		{"closed while closing", true, func(lg *zap.Logger) {
			lg.Error("setting up serving from embedded etcd failed.", zap.Error(closedErr))
		}, ""},
		{"http closed while closing", true, func(lg *zap.Logger) {
			lg.Warn("stopping insecure grpc server due to error", zap.Error(http.ErrServerClosed))
		}, ""},
		{"mux closed while closing", true, func(lg *zap.Logger) {
			lg.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("mux: server closed")))
		}, ""},
		{"mux listener closed while closing", true, func(lg *zap.Logger) {
			lg.Error("setting up serving from embedded etcd failed.", zap.Error(errors.New("mux: listener closed")))
		}, ""},
		{"grpc stopped while closing", true, func(lg *zap.Logger) {
			lg.Warn("stopping insecure grpc server due to error", zap.Error(grpc.ErrServerStopped))
		}, ""},
		{"stream cancelled while closing", true, func(lg *zap.Logger) {
			lg.Warn("lost TCP streaming connection with remote peer", zap.String("remote-peer-id", "4cc9053f69368a1a"), zap.Error(context.Canceled))
		}, ""},
		{"stream closed while closing", true, func(lg *zap.Logger) {
			lg.Warn("closed TCP streaming connection with remote peer", zap.String("remote-peer-id", "4cc9053f69368a1a"))
		}, ""},
		{"stream closed while running", false, func(lg *zap.Logger) {
			lg.Warn("closed TCP streaming connection with remote peer", zap.String("remote-peer-id", "4cc9053f69368a1a"))
		}, `[WARN]  berth.etcd: closed TCP streaming connection with remote peer: remote-peer-id=4cc9053f69368a1a`},
		{"stream lost while running", false, func(lg *zap.Logger) {
			lg.Warn("lost TCP streaming connection with remote peer", zap.Error(errors.New("unexpected EOF")))
		}, `[WARN]  berth.etcd: lost TCP streaming connection with remote peer: error="unexpected EOF"`},
		{"closed while running", false, func(lg *zap.Logger) {
			lg.Error("setting up serving from embedded etcd failed.", zap.Error(closedErr))
		}, `[ERROR] berth.etcd: setting up serving from embedded etcd failed.: error="accept tcp 127.0.0.1:2379: use of closed network connection"`},
		{"other error while closing", true, func(lg *zap.Logger) {
			lg.Error("failed to save consistent index", zap.Error(errors.New("disk I/O error")))
		}, `[ERROR] berth.etcd: failed to save consistent index: error="disk I/O error"`},
		{"warning without error while closing", true, func(lg *zap.Logger) {
			lg.Warn("apply request took too long", zap.Duration("took", 2*time.Second))
		}, `[WARN]  berth.etcd: apply request took too long: took=2s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, level := range []string{"warn", "info"} {
				var buf logtest.Buffer
				closing := new(atomic.Bool)
				closing.Store(tc.closing)
				lg, err := newZapLogger(bufferLogger(&buf, hclog.Trace, false), level, closing)
				if err != nil {
					t.Fatal(err)
				}
				tc.write(lg)
				_, got, _ := strings.Cut(strings.TrimSuffix(buf.String(), "\n"), " ")
				want := tc.want
				if want == "" && level == "info" {
					// Demoted, not dropped: at info it is there.
					if !strings.HasPrefix(got, "[INFO]  berth.etcd: ") {
						t.Errorf("at info: %q, want an [INFO] line", got)
					}
					continue
				}
				if got != want {
					t.Errorf("at %s: %q, want %q", level, got, want)
				}
			}
		})
	}
}
