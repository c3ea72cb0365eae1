package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-project/berth/configs"
)

// requestCounter is a proxy in front of the compute API that counts the
// server reads --wait makes.
type requestCounter struct {
	mu                      sync.Mutex
	lists, perItem, watches int
	// noWatch answers the server watch 404, as a Berth without it does.
	noWatch bool
	// watchCut ends each watch stream after this long, as the API's
	// request deadline does; resumed counts the watches that carried
	// Last-Event-ID.
	watchCut time.Duration
	resumed  int
	// beforeWatch, when set, runs with the watched ids before the first
	// watch request is answered (or refused, with noWatch).
	beforeWatch func(ids []string)
	// stallWatch holds every watch request unanswered until its client
	// gives up, as an API that never hears of a change would.
	stallWatch bool
	// sinceLists counts the lists with changes-since (a delete's polls).
	sinceLists int
}

var serverPath = regexp.MustCompile(`^/v2\.1/servers/[0-9a-f-]{36}$`)

func (c *requestCounter) proxy(t *testing.T, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			c.mu.Lock()
			switch {
			case r.URL.Path == "/v2.1/servers/detail":
				c.lists++
				if r.URL.Query().Has("changes-since") {
					c.sinceLists++
				}
			case serverPath.MatchString(r.URL.Path):
				c.perItem++
			case r.URL.Path == "/v1/servers/watch":
				c.watches++
				if r.Header.Get("Last-Event-ID") != "" {
					c.resumed++
				}
				if c.beforeWatch != nil && c.watches == 1 {
					c.beforeWatch(r.URL.Query()["id"])
				}
				if c.noWatch {
					c.mu.Unlock()
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusNotFound)
					_, _ = w.Write([]byte(`{"itemNotFound": {"code": 404, "message": "The resource could not be found."}}`))
					return
				}
				if c.stallWatch {
					c.mu.Unlock()
					<-r.Context().Done()
					return
				}
				if c.watchCut > 0 {
					c.mu.Unlock()
					cutStream(t, w, r, u, c.watchCut)
					return
				}
			}
			c.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// cutStream relays a watch from target for cut, then ends the answer
// cleanly, as the API does at its request deadline.
func cutStream(t *testing.T, w http.ResponseWriter, r *http.Request, target *url.URL, cut time.Duration) {
	ctx, cancel := context.WithTimeout(r.Context(), cut)
	defer cancel()
	up := r.Clone(ctx)
	up.RequestURI = ""
	up.URL.Scheme, up.URL.Host = target.Scheme, target.Host
	resp, err := http.DefaultTransport.RoundTrip(up)
	if err != nil {
		t.Errorf("relay the watch: %v", err)
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
			_ = http.NewResponseController(w).Flush()
		}
		if err != nil {
			return
		}
	}
}

func (c *requestCounter) counts() (lists, perItem, watches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists, c.perItem, c.watches
}

// TestServerCreateWaitWatches: --wait holds one watch request for all
// the servers it waits for, whatever the interval, and lists them only
// for their ids and the final table; their ids are printed at once and,
// on timeout, again.
func TestServerCreateWaitWatches(t *testing.T) {
	st := startCLIStackBuilding(t, configs.AuthNoAuth, time.Second)
	var rc requestCounter
	cleanEnv(t, "BERTH_API", rc.proxy(t, st.compute))

	code, out, errs := berth("server", "create", "--flavor", "m1.tiny", "--count", "12", "--name", "w",
		"--wait", "--interval", "50ms", "-o", "value", "-c", "status")
	if code != 0 || out != strings.Repeat("ACTIVE\n", 12) {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errs)
	}
	created := regexp.MustCompile(`created 12 server\(s\): ((?:[0-9a-f-]{36} ?){12})\n`).FindStringSubmatch(errs)
	if created == nil || !strings.Contains(errs, "\nwaiting: BUILD=12\n") || !strings.HasSuffix(errs, "\nwaiting: ACTIVE=12\n") {
		t.Errorf("stderr: want the 12 ids at once, then counts by status as they change:\n%s", errs)
	}
	if strings.Contains(errs, "debug:") {
		t.Errorf("stderr: a Berth with the watch should not be polled:\n%s", errs)
	}
	// One list after the create for the ids, one watch, one list for the
	// table: no list per interval, no GET per server.
	if lists, perItem, watches := rc.counts(); lists != 2 || perItem != 0 || watches != 1 {
		t.Errorf("--wait made %d list requests, %d per-server GETs and %d watches; want 2 lists, no GET, 1 watch", lists, perItem, watches)
	}

	code, out, errs = berth("server", "create", "--flavor", "m1.tiny", "--count", "3", "--name", "slow",
		"--wait", "--timeout", "300ms", "--interval", "100ms", "-o", "value", "-c", "id", "-c", "status")
	checkTimedOutWait(t, code, out, errs)
}

// TestServerCreateWaitResumesTheWatch: a watch stream that ends before
// the servers settle (the API's request deadline) is resumed from the
// last revision seen, and the wait still sees every server settle.
func TestServerCreateWaitResumesTheWatch(t *testing.T) {
	st := startCLIStackBuilding(t, configs.AuthNoAuth, time.Second)
	rc := requestCounter{watchCut: 300 * time.Millisecond}
	cleanEnv(t, "BERTH_API", rc.proxy(t, st.compute))

	code, out, errs := berth("server", "create", "--flavor", "m1.tiny", "--count", "6", "--name", "r",
		"--wait", "-o", "value", "-c", "status")
	if code != 0 || out != strings.Repeat("ACTIVE\n", 6) || !strings.HasSuffix(errs, "\nwaiting: ACTIVE=6\n") {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errs)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.watches < 2 || rc.resumed != rc.watches-1 || rc.lists != 2 {
		t.Errorf("a wait over streams cut after 300ms made %d watches (%d resumed with Last-Event-ID) and %d lists; want several, all but the first resumed, and 2 lists",
			rc.watches, rc.resumed, rc.lists)
	}
}

// TestServerCreateWaitPollsWithoutTheWatch: from a Berth without the
// server watch (404), --wait says so and lists all the servers with one
// request per interval, never one GET per server.
func TestServerCreateWaitPollsWithoutTheWatch(t *testing.T) {
	st := startCLIStackBuilding(t, configs.AuthNoAuth, time.Second)
	rc := requestCounter{noWatch: true}
	cleanEnv(t, "BERTH_API", rc.proxy(t, st.compute))

	start := time.Now()
	code, out, errs := berth("server", "create", "--flavor", "m1.tiny", "--count", "12", "--name", "w",
		"--wait", "--interval", "200ms", "-o", "value", "-c", "status")
	elapsed := time.Since(start)
	if code != 0 || out != strings.Repeat("ACTIVE\n", 12) {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errs)
	}
	if !strings.Contains(errs, "debug: GET /v1/servers/watch answered 404 (a Berth without it): listing the servers every 200ms\n") ||
		!strings.Contains(errs, "\nwaiting: BUILD=12\n") || !strings.HasSuffix(errs, "\nwaiting: ACTIVE=12\n") {
		t.Errorf("stderr: want the fallback said, then counts by status as they change:\n%s", errs)
	}
	lists, perItem, watches := rc.counts()
	// One list after the create for the ids, then one per interval.
	if max := 2 + int(elapsed/(200*time.Millisecond)); perItem != 0 || watches != 1 || lists > max {
		t.Errorf("--wait over %s made %d list requests, %d per-server GETs, %d watches; want at most %d lists, no GET, one watch tried",
			elapsed.Round(time.Millisecond), lists, perItem, watches, max)
	}

	code, out, errs = berth("server", "create", "--flavor", "m1.tiny", "--count", "3", "--name", "slow",
		"--wait", "--timeout", "300ms", "--interval", "100ms", "-o", "value", "-c", "id", "-c", "status")
	checkTimedOutWait(t, code, out, errs)
}

// TestServerCreateWaitCountsADeletedServer: a server deleted while
// --wait waits for it is counted DELETED and not waited for until the
// timeout, whether the wait watches (the watch leaves it out) or lists
// (the list leaves it out).
func TestServerCreateWaitCountsADeletedServer(t *testing.T) {
	st := startCLIStackBuilding(t, configs.AuthNoAuth, time.Second)
	for _, noWatch := range []bool{false, true} {
		rc := requestCounter{noWatch: noWatch, beforeWatch: func(ids []string) {
			req, err := http.NewRequest(http.MethodDelete, st.compute+"/v2.1/servers/"+ids[0], nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Auth-Token", "admin:admin")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("delete %s: %v", ids[0], err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				t.Errorf("delete %s: %s", ids[0], resp.Status)
			}
		}}
		cleanEnv(t, "BERTH_API", rc.proxy(t, st.compute))
		start := time.Now()
		code, out, errs := berth("server", "create", "--flavor", "m1.tiny", "--count", "3", "--name", "d",
			"--wait", "--timeout", "60s", "--interval", "100ms", "-o", "value", "-c", "status")
		if code != 0 || out != "ACTIVE\nACTIVE\n" || !strings.HasSuffix(errs, "\nwaiting: ACTIVE=2 DELETED=1\n") {
			t.Errorf("noWatch=%v: exit %d, stdout %q, stderr:\n%s", noWatch, code, out, errs)
		}
		if elapsed := time.Since(start); elapsed > 30*time.Second {
			t.Errorf("noWatch=%v: the wait took %s: the deleted server was waited for", noWatch, elapsed)
		}
	}
}

// checkTimedOutWait: a wait of three servers that cannot settle in time
// exits 1 with them in BUILD, naming each when created and at the timeout.
func checkTimedOutWait(t *testing.T, code int, out, errs string) {
	t.Helper()
	if code != exitFailure {
		t.Errorf("timed out wait: exit %d, want %d", code, exitFailure)
	}
	ids := regexp.MustCompile(`(?m)^([0-9a-f-]{36}) BUILD$`).FindAllStringSubmatch(out, -1)
	if len(ids) != 3 {
		t.Fatalf("timed out wait's table %q: want the three servers in BUILD", out)
	}
	for _, id := range ids {
		if !strings.Contains(errs, "not ACTIVE or ERROR after 300ms: ") || strings.Count(errs, id[1]) != 2 {
			t.Errorf("stderr should name %s when created and again at the timeout:\n%s", id[1], errs)
		}
	}
	if !strings.Contains(errs, "timed out after 300ms with 3 of 3 server(s) not settled") {
		t.Errorf("stderr lacks the summary:\n%s", errs)
	}
}

// TestServerDeleteWaitWatches: delete --wait holds one watch for all the
// servers it deleted until each is gone, with the same count line as a
// create's; from a Berth without the watch it lists them per interval;
// on timeout it names the servers still there.
func TestServerDeleteWaitWatches(t *testing.T) {
	st := startCLIStackBuilding(t, configs.AuthNoAuth, 200*time.Millisecond)
	cleanEnv(t, "BERTH_API", st.compute)
	create := func(name string, n int) []string {
		t.Helper()
		out := mustBerth(t, "server", "create", "--flavor", "m1.tiny", "--count", strconv.Itoa(n), "--name", name,
			"--wait", "-o", "value", "-c", "id")
		return strings.Fields(out)
	}

	ids := create("gone", 4)
	rc := requestCounter{}
	cleanEnv(t, "BERTH_API", rc.proxy(t, st.compute))
	code, _, errs := berth(append([]string{"server", "delete", "--wait", "--interval", "50ms"}, ids...)...)
	if code != 0 || !strings.HasSuffix(errs, "waiting: gone=4\n") || strings.Contains(errs, "debug:") {
		t.Fatalf("delete --wait: exit %d, stderr:\n%s", code, errs)
	}
	if _, _, watches := rc.counts(); watches != 1 || rc.sinceLists != 0 {
		t.Errorf("delete --wait made %d watches and %d changes-since lists; want 1 watch, no list", watches, rc.sinceLists)
	}
	if out := mustBerth(t, "server", "list", "--all-projects", "-o", "value", "-c", "id"); out != "" {
		t.Errorf("after delete --wait, servers are left:\n%s", out)
	}

	ids = create("polled", 3)
	rc = requestCounter{noWatch: true}
	cleanEnv(t, "BERTH_API", rc.proxy(t, st.compute))
	code, _, errs = berth(append([]string{"server", "delete", "--wait", "--interval", "50ms"}, ids...)...)
	if code != 0 || !strings.Contains(errs, "debug: GET /v1/servers/watch answered 404 (a Berth without it): listing the servers every 50ms\n") ||
		!strings.HasSuffix(errs, "waiting: gone=3\n") || rc.sinceLists == 0 {
		t.Errorf("delete --wait without the watch: exit %d, %d changes-since lists, stderr:\n%s", code, rc.sinceLists, errs)
	}

	// A member, not an admin, is refused every project's watch (403) and
	// watches its own servers instead.
	rc = requestCounter{}
	cleanEnv(t, "OS_AUTH_TYPE", "none", "OS_USERNAME", "alice", "OS_PROJECT_ID", "alices", "OS_ENDPOINT", rc.proxy(t, st.compute))
	ids = create("alices", 2)
	_, _, before := rc.counts() // the create's wait watched too
	code, _, errs = berth(append([]string{"server", "delete", "--wait", "--interval", "50ms"}, ids...)...)
	if _, _, after := rc.counts(); code != 0 || !strings.HasSuffix(errs, "waiting: gone=2\n") || after-before != 2 || rc.sinceLists != 0 {
		t.Errorf("a member's delete --wait: exit %d, %d watches (want 2: all projects refused, then its own), %d lists, stderr:\n%s",
			code, after-before, rc.sinceLists, errs)
	}
	cleanEnv(t, "BERTH_API", st.compute)

	ids = create("stuck", 2)
	rc = requestCounter{stallWatch: true}
	cleanEnv(t, "BERTH_API", rc.proxy(t, st.compute))
	code, _, errs = berth(append([]string{"server", "delete", "--wait", "--timeout", "300ms"}, ids...)...)
	if code != exitFailure || !strings.Contains(errs, "still there after 300ms: "+strings.Join(ids, " ")+"\n") ||
		!strings.Contains(errs, "timed out after 300ms with 2 of 2 server(s) not deleted") {
		t.Errorf("delete --wait that hears nothing: exit %d, stderr:\n%s", code, errs)
	}
}
