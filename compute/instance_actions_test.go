package compute

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// A server that failed on two hosts before it went ACTIVE on a third
// shows one create action with the scheduling event and an event per
// build attempt, the failed ones with their reasons.
func TestInstanceActions(t *testing.T) {
	a := newTestAPI(t)
	id := a.request("web", "p1", t0, etcdschema.SchedulerHints{})
	a.place(id, "compute-3", etcdschema.StatusActive, t0.Add(3*time.Minute), nil)
	ctx := context.Background()
	key := a.keys.CellInstance("cell1", id)
	resp, err := a.cli.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var in etcdschema.Instance
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &in); err != nil {
		t.Fatal(err)
	}
	in.FailedAttempts = []etcdschema.Attempt{{Host: "compute-1", Reason: "exited 1 right after start", At: t0.Add(time.Minute)},
		{Host: "compute-2", Reason: "image not runnable", At: t0.Add(2 * time.Minute)}}
	if _, err := a.cli.Put(ctx, key, etcdschema.MustEncode(&in)); err != nil {
		t.Fatal(err)
	}
	action := `{"action": "create", "instance_uuid": "` + id + `", "request_id": "req-test", "user_id": "u-p1", "project_id": "p1", ` +
		`"start_time": "2026-11-26T10:00:00.000000", "message": null`
	a.expect(a.do("GET", "/v2.1/servers/"+id+"/os-instance-actions", ""), 200, `{"instanceActions": [`+action+`}]}`)
	a.expect(a.do("GET", "/v2.1/servers/"+id+"/os-instance-actions/req-test", "", mv("2.51")), 200, `{"instanceAction": `+action+`, "events": [`+
		`{"event": "schedule_and_build_instances", "start_time": "2026-11-26T10:00:00.000000", "finish_time": "2026-11-26T10:01:00.000000", "result": "Success", "traceback": null}, `+
		`{"event": "compute__do_build_and_run_instance", "start_time": "2026-11-26T10:01:00.000000", "finish_time": "2026-11-26T10:02:00.000000", "result": "Error", "traceback": "exited 1 right after start"}, `+
		`{"event": "compute__do_build_and_run_instance", "start_time": "2026-11-26T10:02:00.000000", "finish_time": "2026-11-26T10:03:00.000000", "result": "Error", "traceback": "image not runnable"}, `+
		`{"event": "compute__do_build_and_run_instance", "start_time": "2026-11-26T10:02:00.000000", "finish_time": "2026-11-26T10:03:00.000000", "result": "Success", "traceback": null}]}}`)
	rec := a.do("GET", "/v2.1/servers/"+id+"/os-instance-actions/req-test", "", mv("2.84"))
	want := `{"event": "compute__do_build_and_run_instance", "start_time": "2026-11-26T10:01:00.000000", "finish_time": "2026-11-26T10:02:00.000000", ` +
		`"result": "Error", "traceback": "exited 1 right after start", "host": "compute-1", "hostId": "` + hostID("compute-1", "p1") + `", "details": "exited 1 right after start"}`
	if !strings.Contains(rec.Body.String(), want) || !strings.Contains(rec.Body.String(), `"updated_at": "2026-11-26T10:03:00.000000", "events"`) {
		t.Errorf("2.84: %s\nwant it to hold %s", rec.Body, want)
	}
	a.expect(a.do("GET", "/v2.1/servers/"+id+"/os-instance-actions/req-nope", ""), 404,
		`{"itemNotFound": {"code": 404, "message": "Action req-nope not found"}}`)

	// 2.58: paging and the updated_at window.
	for _, tc := range []struct{ query, status, body string }{
		{"?limit=1", "200", `"request_id": "req-test"`},
		{"?marker=req-test", "200", `{"instanceActions": []}`},
		{"?marker=req-nope", "400", `"Marker None could not be found."`},
		{"?changes-since=2026-11-26T10:03:01Z", "200", `{"instanceActions": []}`},
		{"?changes-since=2026-11-26T10:03:00Z", "200", `"request_id": "req-test"`},
		{"?foo=1", "400", `Additional properties are not allowed ('foo' was unexpected)`},
		{"?limit=1&limit=2", "400", `is too long`},
	} {
		rec := a.do("GET", "/v2.1/servers/"+id+"/os-instance-actions"+tc.query, "", mv("2.58"))
		if fmt.Sprint(rec.Code) != tc.status || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("2.58 %s: %d %s; want %s with %s", tc.query, rec.Code, rec.Body, tc.status, tc.body)
		}
	}
	if rec := a.do("GET", "/v2.1/servers/"+id+"/os-instance-actions?limit=1", "", mv("2.58")); !strings.Contains(rec.Body.String(),
		`"links": [{"rel": "next", "href": "http://nova.test:8774/v2.1/servers/`+id+`/os-instance-actions?limit=1&marker=req-test"}]`) {
		t.Errorf("2.58 next link: %s", rec.Body)
	}

	// An accepted delete is a second action, newest first.
	if rec := a.do("DELETE", "/v2.1/servers/"+id, ""); rec.Code != 204 {
		t.Fatalf("delete: %d %s", rec.Code, rec.Body)
	}
	rec = a.do("GET", "/v2.1/servers/"+id+"/os-instance-actions", "")
	if !strings.Contains(rec.Body.String(), `{"instanceActions": [{"action": "delete", "instance_uuid": "`+id+`", "request_id": "req-`) {
		t.Errorf("after a delete: %s", rec.Body)
	}
}
