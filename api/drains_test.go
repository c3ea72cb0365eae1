package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// TestDrainAPI drives POST, GET and DELETE /v1/hosts/{host}/drain over
// real HTTP and etcd (no leader runs here: the record is the API's
// answer, the moving is package drain's, tested there), and every
// refusal's status and message.
func TestDrainAPI(t *testing.T) {
	o := newOpsStack(t)
	o.startAgent(t, "compute-1", "cell1")
	o.startAgent(t, "compute-2", "cell1")
	ctx := t.Context()
	// Two servers reported by compute-1, as its agent reports them.
	var ops []clientv3.Op
	for _, id := range []string{"a0000000-0000-4000-8000-000000000001", "a0000000-0000-4000-8000-000000000002"} {
		ops = append(ops, clientv3.OpPut(o.keys.HostInstance("compute-1", id),
			etcdschema.MustEncode(&etcdschema.InstanceInfo{UUID: id, Host: "compute-1", State: "running"})))
	}
	if _, err := o.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		desc, method, host, body string
		status                   int
		msg                      string
	}{
		{"no drain to show", "GET", "compute-1", "", 404, "Host compute-1 has no drain."},
		{"no drain to cancel", "DELETE", "compute-1", "", 404, "Host compute-1 has no drain."},
		{"unknown host", "POST", "compute-9", "{}", 404, "Compute host compute-9 could not be found."},
		{"unknown field", "POST", "compute-1", `{"paralel": 2}`, 400, "paralel"},
		{"bad deadline", "POST", "compute-1", `{"deadline": "soon"}`, 400, `'deadline' must be a positive duration such as "90m", not "soon"`},
		{"negative deadline", "POST", "compute-1", `{"deadline": "-5m"}`, 400, "'deadline' must be a positive duration"},
		{"parallel too high", "POST", "compute-1", `{"parallel": 65}`, 400, "'parallel' must be between 1 and 64, not 65"},
		{"live without live migration", "POST", "compute-1", `{"live": true}`, 400, "live migration is not available in this build"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			status, msg := o.raw(t, tc.method, "/v1/hosts/"+tc.host+"/drain", tc.body)
			if status != tc.status || !strings.Contains(msg, tc.msg) {
				t.Errorf("%s: %d %q, want %d containing %q", tc.desc, status, msg, tc.status, tc.msg)
			}
		})
	}
	// None of the refusals disabled the host.
	if svc := o.service(t, "compute-1"); svc.Status != "enabled" {
		t.Fatalf("compute-1 after refused drains: %+v", svc)
	}

	d, err := o.c.StartDrain(ctx, "compute-1", DrainRequest{Deadline: "30m", Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	if d.State != etcdschema.DrainDraining || d.Parallel != 2 || d.Deadline == nil || len(d.Instances) != 2 ||
		d.Counts[etcdschema.DrainWaiting] != 2 || !strings.HasPrefix(d.RequestID, "req-") || d.Warning != "" {
		t.Errorf("started: %+v", d)
	}
	if left := time.Until(*d.Deadline); left < 29*time.Minute || left > 30*time.Minute {
		t.Errorf("deadline %s is %s away, want 30m", d.Deadline, left)
	}
	if svc := o.service(t, "compute-1"); svc.Status != "disabled" || svc.DisabledReason != "draining" {
		t.Errorf("compute-1 while draining: %+v", svc)
	}
	var apiErr *APIError
	if _, err := o.c.StartDrain(ctx, "compute-1", DrainRequest{}); !errors.As(err, &apiErr) || apiErr.Status != 409 ||
		!strings.Contains(apiErr.Message, "already draining") {
		t.Errorf("second drain: %v, want 409 already draining", err)
	}
	got, err := o.c.ShowDrain(ctx, "compute-1")
	if err != nil || got.RequestID != d.RequestID || len(got.Instances) != 2 {
		t.Errorf("show: %+v %v", got, err)
	}
	c, err := o.c.CancelDrain(ctx, "compute-1")
	if err != nil || c.State != etcdschema.DrainCancelled || c.FinishedAt == nil {
		t.Errorf("cancel: %+v %v", c, err)
	}
	if _, err := o.c.CancelDrain(ctx, "compute-1"); !errors.As(err, &apiErr) || apiErr.Status != 409 {
		t.Errorf("cancel an ended drain: %v, want 409", err)
	}
	// The host stays disabled after a cancel; a new drain may start.
	if svc := o.service(t, "compute-1"); svc.Status != "disabled" {
		t.Errorf("compute-1 after cancel: %+v", svc)
	}
	again, err := o.c.StartDrain(ctx, "compute-1", DrainRequest{})
	if err != nil || again.RequestID == d.RequestID || again.Parallel != 4 || again.Deadline != nil {
		t.Errorf("drain again: %+v %v", again, err)
	}
}

// raw sends body to path as noauth2's admin and returns the status and
// the error message (or the whole body).
func (o *opsStack) raw(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	}
	req, err := http.NewRequestWithContext(t.Context(), method, o.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e map[string]struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		for _, v := range e {
			if v.Message != "" {
				return resp.StatusCode, v.Message
			}
		}
	}
	return resp.StatusCode, string(b)
}
