package compute

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-project/berth/api"
)

// TestZonesFromAggregates: a host in an AZ aggregate (made through /v1,
// as an operator does today) is in that zone in os-services and
// os-availability-zone; the zone is not available once its only host is
// disabled, while the default zone stays available through the other.
func TestZonesFromAggregates(t *testing.T) {
	r := newHostsRig(t)
	r.controls()
	r.startAgent("compute-1")
	r.startAgent("compute-2")
	c := api.NewClient(r.serve())
	ctx := context.Background()
	agg, err := c.CreateAggregate(ctx, "agg1", "az1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AggregateAddHost(ctx, agg.ID, "compute-1"); err != nil {
		t.Fatal(err)
	}
	get := func(path string, hdr ...string) string {
		t.Helper()
		rec := r.do("GET", "/v2.1"+path, "", hdr...)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	if got := get("/os-services?host=compute-1"); !strings.Contains(got, `"zone": "az1"`) {
		t.Errorf("compute-1's service: %s", got)
	}
	cases := []struct {
		desc, path, want string
	}{
		{"both zones available", "/os-availability-zone",
			`{"availabilityZoneInfo": [{"zoneName": "az1", "zoneState": {"available": true}, "hosts": null}, {"zoneName": "nova", "zoneState": {"available": true}, "hosts": null}]}`},
	}
	for _, tc := range cases {
		if got := get(tc.path); got != tc.want {
			t.Errorf("%s: got %s\nwant %s", tc.desc, got, tc.want)
		}
	}
	rec := r.do("PUT", "/v2.1/os-services/disable", `{"host": "compute-1", "binary": "nova-compute"}`)
	if rec.Code != 200 {
		t.Fatalf("disable: %d %s", rec.Code, rec.Body)
	}
	want := `{"availabilityZoneInfo": [{"zoneName": "nova", "zoneState": {"available": true}, "hosts": null}, {"zoneName": "az1", "zoneState": {"available": false}, "hosts": null}]}`
	if got := get("/os-availability-zone"); got != want {
		t.Errorf("az1 with its host disabled: got %s\nwant %s", got, want)
	}
	detail := get("/os-availability-zone/detail")
	if !strings.Contains(detail, `{"zoneName": "az1", "zoneState": {"available": false}, "hosts": null}`) ||
		!strings.Contains(detail, `"compute-2": {"nova-compute": {"available": true, "active": true`) ||
		strings.Contains(detail, `"compute-1"`) {
		t.Errorf("detail: %s", detail)
	}
}

// TestControlServicesAreNotChanged: Berth's nova-scheduler and
// nova-conductor are running processes' registrations; Nova's rule that
// only nova-compute services are updated holds, and a delete is refused
// (Nova would delete the row; Berth has none to delete).
func TestControlServicesAreNotChanged(t *testing.T) {
	r := newHostsRig(t)
	r.controls()
	list := r.do("GET", "/v2.1/os-services?binary=nova-scheduler", "", mv("2.53")).Body.String()
	i := strings.Index(list, `"id": "`)
	if i < 0 {
		t.Fatalf("no scheduler listed: %s", list)
	}
	id := list[i+7 : i+7+36]
	r.expect(r.do("PUT", "/v2.1/os-services/"+id, `{"status": "disabled"}`, mv("2.53")), 400,
		`{"badRequest": {"code": 400, "message": "Updating a nova-scheduler service is not supported. Only nova-compute services can be updated."}}`)
	r.expect(r.do("DELETE", "/v2.1/os-services/"+id, "", mv("2.53")), 409,
		`{"conflictingRequest": {"code": 409, "message": "The nova-scheduler service on controller is the registration of a running Berth process; stop the process to remove it."}}`)
}
