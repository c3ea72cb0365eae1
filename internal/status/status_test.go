package status

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/metrics"
)

func do(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// TestReadyz: 503 naming each failing check and why until every check
// passes, then 200; 503 again once the process is stopping.
func TestReadyz(t *testing.T) {
	st := New(metrics.New())
	st.Etcd(etcdtest.Client(t), "/berth/health")
	synced := make(chan struct{})
	st.Ready("queue", synced, "queue not synced yet")
	h := st.Handler()

	code, body := do(t, h, http.MethodGet, PathReady)
	var r Readiness
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if code != http.StatusServiceUnavailable || r.Ready || len(r.Checks) != 2 ||
		!r.Checks[0].OK || r.Checks[1].OK || r.Checks[1].Error != "queue not synced yet" {
		t.Fatalf("before sync: %d %s", code, body)
	}
	close(synced)
	if code, body := do(t, h, http.MethodGet, PathReady); code != http.StatusOK || !strings.Contains(body, `"ready":true`) {
		t.Fatalf("after sync: %d %s", code, body)
	}
	st.Stopping()
	if code, body := do(t, h, http.MethodGet, PathReady); code != http.StatusServiceUnavailable || !strings.Contains(body, "shutting down") {
		t.Fatalf("stopping: %d %s", code, body)
	}
	if code, _ := do(t, h, http.MethodGet, PathHealth); code != http.StatusOK {
		t.Fatalf("/healthz while stopping = %d, want 200: the process runs", code)
	}
}

// TestMount: only GET/HEAD of the three paths reach the status handler;
// everything else, those paths with other methods included, reaches the
// application unchanged.
func TestMount(t *testing.T) {
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "app "+r.Method+" "+r.URL.Path)
	})
	h := Mount(app, New(metrics.New()).Handler())
	cases := []struct {
		desc, method, path string
		want               int
		body               string
	}{
		{desc: "healthz", method: http.MethodGet, path: PathHealth, want: 200, body: `"status":"ok"`},
		{desc: "metrics", method: http.MethodGet, path: PathMetrics, want: 200, body: "berth_placement_claims_total"},
		{desc: "readyz without checks", method: http.MethodGet, path: PathReady, want: 200, body: `"ready":true`},
		{desc: "POST metrics is the app's", method: http.MethodPost, path: PathMetrics, want: 418, body: "app POST /metrics"},
		{desc: "sub-path is the app's", method: http.MethodGet, path: PathHealth + "/x", want: 418},
		{desc: "API path is the app's", method: http.MethodGet, path: "/resource_providers", want: 418},
		{desc: "root is the app's", method: http.MethodGet, path: "/", want: 418},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			code, body := do(t, h, tc.method, tc.path)
			if code != tc.want || !strings.Contains(body, tc.body) {
				t.Errorf("%s %s = %d %q, want %d containing %q", tc.method, tc.path, code, body, tc.want, tc.body)
			}
		})
	}
}

// TestNilStatus: a process built without a Status still answers.
func TestNilStatus(t *testing.T) {
	var st *Status
	st.Check("x", nil)
	st.Stopping()
	for _, p := range []string{PathHealth, PathReady} {
		if code, body := do(t, st.Handler(), http.MethodGet, p); code != http.StatusOK {
			t.Errorf("%s = %d %s", p, code, body)
		}
	}
}

// TestEtcdAlarms: the etcd alarms check passes with no alarm, fails
// naming NOSPACE once a member with a small quota is full (and
// berth_etcd_alarm says so on /metrics), and passes again once the alarm
// is disarmed.
func TestEtcdAlarms(t *testing.T) {
	const quota = 4 << 20
	cli := etcdtest.StartWith(t, func(c *embedetcd.Config) { c.QuotaBackendBytes = quota }).Client()
	st := New(metrics.New())
	st.EtcdAlarms(cli)
	h := st.Handler()
	if code, body := do(t, h, http.MethodGet, PathReady); code != http.StatusOK {
		t.Fatalf("/readyz with no alarm = %d %s", code, body)
	}
	if _, body := do(t, h, http.MethodGet, PathMetrics); !strings.Contains(body, `berth_etcd_alarm{type="NOSPACE"} 0`) {
		t.Errorf("/metrics with no alarm lacks berth_etcd_alarm{type=\"NOSPACE\"} 0")
	}
	ctx := context.Background()
	etcdtest.FillUntilNoSpace(t, cli, quota)
	code, body := do(t, h, http.MethodGet, PathReady)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"name":"`+EtcdAlarmsCheck+`"`) || !strings.Contains(body, "NOSPACE") {
		t.Errorf("/readyz under NOSPACE = %d %s, want 503 naming the %q check and NOSPACE", code, body, EtcdAlarmsCheck)
	}
	if _, body := do(t, h, http.MethodGet, PathMetrics); !strings.Contains(body, `berth_etcd_alarm{type="NOSPACE"} 1`) {
		t.Errorf("/metrics under NOSPACE lacks berth_etcd_alarm{type=\"NOSPACE\"} 1")
	}
	alarms, err := cli.AlarmList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alarms.Alarms {
		if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: a.MemberID, Alarm: a.Alarm}); err != nil {
			t.Fatal(err)
		}
	}
	if code, body := do(t, h, http.MethodGet, PathReady); code != http.StatusOK {
		t.Errorf("/readyz once disarmed = %d %s", code, body)
	}
}
