package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	gosync "sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/internal/status"
	"github.com/berth-project/berth/placement"
)

// TestConformanceGabbits runs OpenStack Placement's own gabbits (in
// <repo>/../shared/conformance) against Berth's API. START_CMD and
// STOP_CMD are curl calls to a control endpoint served by this test, so
// every gabbit file gets a fresh embedded etcd and Service in-process.
// Set GABBI_FILES to run some files only.
func TestConformanceGabbits(t *testing.T) {
	passed, failed := runGabbits(t, &gabbiHarness{t: t}, strings.Fields(os.Getenv("GABBI_FILES")))
	// All 575 upstream tests pass. The floor keeps that so for a full run;
	// GABBI_STRICT=1 (which .ci/run sets) fails on any failed test, also
	// when GABBI_FILES runs only some files.
	if os.Getenv("GABBI_STRICT") == "1" && failed > 0 {
		t.Errorf("%d gabbits failed", failed)
	}
	if passed < conformanceFloor && os.Getenv("GABBI_FILES") == "" {
		t.Errorf("%d gabbits passed, fewer than the floor of %d", passed, conformanceFloor)
	}
}

// TestConformanceGabbitsOnView runs the allocation-candidates gabbits
// with every multi-group search moved off the index's lock onto its own
// view (SetSearchViewAbove(0)): the answers must be the ones the index
// gives, so every one of them passes.
func TestConformanceGabbitsOnView(t *testing.T) {
	files := []string{"allocation-candidates.yaml", "allocation-candidates-root-required.yaml", "granular.yaml"}
	passed, failed := runGabbits(t, &gabbiHarness{t: t, viewAlways: true}, files)
	if failed > 0 || passed == 0 {
		t.Errorf("%d gabbits passed, %d failed on the search's view", passed, failed)
	}
}

// runGabbits runs the gabbit files (all when none are named) against a
// fresh placement per file, and returns how many tests passed and failed.
func runGabbits(t *testing.T, h *gabbiHarness, files []string) (passed, failed int) {
	t.Helper()
	shared, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "conformance"))
	if err != nil {
		t.Fatal(err)
	}
	runner := filepath.Join(shared, "run-gabbits.sh")
	if _, err := os.Stat(runner); err != nil {
		t.Skipf("conformance suite not found at %s (the repo's ../shared): %v", shared, err)
	}
	if _, err := exec.LookPath("gabbi-run"); err != nil {
		t.Skip("gabbi-run not installed (Debian package python3-gabbi)")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	if testing.Short() {
		t.Skip("conformance suite skipped in -short mode")
	}
	apiURL := h.serve(t, http.HandlerFunc(h.serveAPI))
	ctlURL := h.serve(t, http.HandlerFunc(h.control))
	t.Cleanup(h.stop)
	logDir := t.TempDir()
	if d := os.Getenv("GABBI_LOG_DIR"); d != "" {
		logDir = d
	}
	args := []string{filepath.Join(shared, "gabbits"),
		fmt.Sprintf("curl -sf -X POST %s/start", ctlURL),
		fmt.Sprintf("curl -sf -X POST %s/stop", ctlURL), apiURL}
	args = append(args, files...)
	cmd := exec.Command(runner, args...)
	cmd.Env = append(os.Environ(), "GABBI_LOG_DIR="+logDir)
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		// gabbi and its helpers live in the system python.
		cmd.Env = append(cmd.Env, "GABBI_PYTHON=/usr/bin/python3")
	}
	out, err := cmd.CombinedOutput()
	t.Logf("gabbits (logs in %s):\n%s", logDir, out)
	passed, failed = -1, -1
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var sk int
		if n, _ := fmt.Sscanf(line, "%d passed, %d failed, %d skipped", &passed, &failed, &sk); n == 3 {
			break
		}
	}
	if passed < 0 {
		t.Fatalf("conformance runner gave no summary (err %v)", err)
	}
	return passed, failed
}

// conformanceFloor is the number of the 575 upstream gabbits known to
// pass: all of them.
const conformanceFloor = 575

// gabbiHarness owns the current placement under test.
type gabbiHarness struct {
	t      *testing.T
	mu     gosync.Mutex
	srv    *embedetcd.Server
	api    http.Handler // the API of the current placement service
	cancel context.CancelFunc
	n      int
	// viewAlways runs every multi-group search on a view.
	viewAlways bool
}

func (h *gabbiHarness) serve(t *testing.T, handler http.Handler) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(Listener(l))
	t.Cleanup(func() { srv.Close() })
	return "http://" + l.Addr().String()
}

func (h *gabbiHarness) serveAPI(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	api := h.api
	h.mu.Unlock()
	if api == nil {
		http.Error(w, "no placement running", http.StatusServiceUnavailable)
		return
	}
	// As cmd/berth serves it: with /healthz, /readyz and /metrics mounted,
	// which must change no answer a gabbit checks.
	status.Mount(api, status.New(metrics.New()).Handler()).ServeHTTP(w, r)
}

func (h *gabbiHarness) control(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/start":
		if err := h.start(); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
	case "/stop":
		h.stop()
	default:
		http.NotFound(w, r)
	}
}

func (h *gabbiHarness) start() error {
	h.stop()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	srv, err := embedetcd.Start(embedetcd.Config{
		DataDir:   filepath.Join(h.t.TempDir(), fmt.Sprintf("etcd%d", h.n)),
		ClientURL: fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(h.t)),
		PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", etcdtest.FreePort(h.t)),
	})
	if err != nil {
		return err
	}
	svc := placement.New(srv.Client(), etcdschema.New(""), hclog.NewNullLogger())
	if h.viewAlways {
		svc.SetSearchViewAbove(0)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := svc.Start(ctx); err != nil {
		cancel()
		srv.Close()
		return err
	}
	h.srv, h.api, h.cancel = srv, New(svc, nil, Options{}), cancel
	return nil
}

func (h *gabbiHarness) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cancel != nil {
		h.cancel()
	}
	if h.srv != nil {
		h.srv.Close()
	}
	h.srv, h.api, h.cancel = nil, nil, nil
}
