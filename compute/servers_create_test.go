package compute

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/identity"
)

// testImages is a small image catalog for the tests inside the package:
// package images (the real catalog, images.Store) imports compute, so
// only an outside test can use it (servers_images_test.go does).
type testImages map[string]Image

// Image ignores the caller: every test image is public.
func (c testImages) Image(_ context.Context, _ identity.Credentials, id string) (Image, error) {
	im, ok := c[id]
	if !ok {
		return Image{}, ErrImageNotFound
	}
	return im, nil
}

const (
	sleeperID = "7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f60"
	bigID     = "8c3fae51-2a7b-4d2c-8b68-1c4d3e5f6071"
)

func newCreateAPI(t *testing.T) *testAPI {
	a := newTestAPI(t)
	a.api.SetImages(testImages{
		sleeperID: {ID: sleeperID, Name: "sleeper", Command: []string{"sleep", "600"}},
		bigID:     {ID: bigID, Name: "big", MinRAMMB: 4096, MinDiskGB: 40},
	})
	return a
}

// A create answers 202 with Nova's body and Location, and stores build
// requests that carry the image, metadata and description.
func TestServerCreate(t *testing.T) {
	a := newCreateAPI(t)
	rec := a.do("POST", "/v2.1/servers", `{"server": {"name": "web", "flavorRef": "1", "imageRef": "`+sleeperID+`",
		"networks": "none", "metadata": {"role": "front"}, "description": "the <web> one"},
		"os:scheduler_hints": {"same_host": "`+strings.ToUpper(sleeperID)+`"}}`, mv("2.74"))
	if rec.Code != http.StatusAccepted {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	re := regexp.MustCompile(`^\{"server": \{"id": "([0-9a-f-]{36})", "links": \[\{"rel": "self", "href": "http://nova.test:8774/v2.1/servers/([0-9a-f-]{36})"\}, ` +
		`\{"rel": "bookmark", "href": "http://nova.test:8774/servers/[0-9a-f-]{36}"\}\], "OS-DCF:diskConfig": "MANUAL", ` +
		`"security_groups": \[\{"name": "default"\}\], "adminPass": "[2-9A-Za-z]{12}"\}\}$`)
	m := re.FindStringSubmatch(rec.Body.String())
	if m == nil || m[1] != m[2] {
		t.Fatalf("create body: %s", rec.Body)
	}
	id := m[1]
	if loc := rec.Header().Get("Location"); loc != "http://nova.test:8774/v2.1/servers/"+id {
		t.Errorf("Location: %q", loc)
	}
	v, err := a.api.servers.Lookup(context.Background(), id)
	if err != nil || v.BuildRequest == nil {
		t.Fatalf("lookup: %+v %v", v, err)
	}
	br := v.BuildRequest
	if br.Image == nil || br.Image.Name != "sleeper" || strings.Join(br.Image.Command, " ") != "sleep 600" ||
		br.Metadata["role"] != "front" || br.Description == nil || *br.Description != "the <web> one" ||
		len(br.Hints.SameHost) != 1 || br.Hints.SameHost[0] != sleeperID {
		t.Errorf("build request: %+v (image %+v)", br, br.Image)
	}
	var show struct {
		Server map[string]any `json:"server"`
	}
	if err := json.Unmarshal(a.do("GET", "/v2.1/servers/"+id, "", mv("2.19")).Body.Bytes(), &show); err != nil {
		t.Fatal(err)
	}
	img, _ := json.Marshal(show.Server["image"])
	if string(img) != `{"id":"`+sleeperID+`","links":[{"href":"http://nova.test:8774/images/`+sleeperID+`","rel":"bookmark"}]}` ||
		show.Server["description"] != "the <web> one" {
		t.Errorf("show: image %s, server %v", img, show.Server)
	}

	// return_reservation_id, and min/max_count: max_count servers.
	rec = a.do("POST", "/v2.1/servers", `{"server": {"name": "many", "flavorRef": "1", "imageRef": "`+sleeperID+`",
		"min_count": 2, "max_count": "3", "return_reservation_id": "True"}}`)
	var res struct {
		ReservationID string `json:"reservation_id"`
	}
	if rec.Code != http.StatusAccepted || json.Unmarshal(rec.Body.Bytes(), &res) != nil || !strings.HasPrefix(res.ReservationID, "r-") {
		t.Fatalf("reservation: %d %s", rec.Code, rec.Body)
	}
	names, _ := a.listNames("/v2.1/servers?reservation_id="+res.ReservationID+"&sort_key=display_name&sort_dir=asc", "2.1", "admin:admin")
	if strings.Join(names, ",") != "many-1,many-2,many-3" {
		t.Errorf("reservation's servers: %v", names)
	}
}

// Bad creates answer as Nova's schema and create do.
func TestServerCreateErrors(t *testing.T) {
	a := newCreateAPI(t)
	groupResp := a.do("POST", "/v1/server-groups", `{"server_group": {"name": "g", "policy": "affinity"}}`)
	var g struct {
		ServerGroup struct{ ID string } `json:"server_group"`
	}
	_ = json.Unmarshal(groupResp.Body.Bytes(), &g)
	img := `"imageRef": "` + sleeperID + `"`
	bad := func(msg string) string { return `{"badRequest": {"code": 400, "message": "` + msg + `"}}` }
	cases := []struct {
		desc, version, body string
		status              int
		want                string
	}{
		{"no server", "2.1", `{}`, 400, bad("'server' is a required property")},
		{"no flavorRef", "2.1", `{"server": {"name": "x"}}`, 400, bad("Invalid input for field/attribute server. Value: {'name': 'x'}. 'flavorRef' is a required property")},
		{"networks required from 2.37", "2.37", `{"server": {"name": "x", "flavorRef": "1", ` + img + `}}`, 400,
			bad("Invalid input for field/attribute server. Value: {'name': 'x', 'flavorRef': '1', 'imageRef': '" + sleeperID + "'}. 'networks' is a required property")},
		{"bad networks value", "2.37", `{"server": {"name": "x", "flavorRef": "1", "networks": "some", ` + img + `}}`, 400,
			bad("Invalid input for field/attribute networks. Value: some. 'some' is not valid under any of the given schemas")},
		{"unknown member", "2.1", `{"server": {"name": "x", "flavorRef": "1", "colour": "red"}}`, 400,
			bad("Invalid input for field/attribute server. Value: {'name': 'x', 'flavorRef': '1', 'colour': 'red'}. Additional properties are not allowed ('colour' was unexpected)")},
		{"blank name", "2.1", `{"server": {"name": " x", "flavorRef": "1"}}`, 400,
			bad("An invalid 'name' value was provided. The name must be: printable characters. Can not start or end with whitespace.")},
		{"host before 2.74", "2.73", `{"server": {"name": "x", "flavorRef": "1", "networks": "none", "host": "compute-1"}}`, 400,
			bad("Invalid input for field/attribute server. Value: {'name': 'x', 'flavorRef': '1', 'networks': 'none', 'host': 'compute-1'}. Additional properties are not allowed ('host' was unexpected)")},
		{"min_count 0", "2.1", `{"server": {"name": "x", "flavorRef": "1", "min_count": 0}}`, 400,
			bad("Invalid input for field/attribute min_count. Value: 0. 0 is less than the minimum of 1")},
		{"min over max", "2.1", `{"server": {"name": "x", "flavorRef": "1", ` + img + `, "min_count": 3, "max_count": 2}}`, 400,
			bad("min_count must be <= max_count")},
		{"group hint not a uuid", "2.1", `{"server": {"name": "x", "flavorRef": "1", ` + img + `}, "os:scheduler_hints": {"group": "` +
			sleeperID + `/members/` + sleeperID + `"}}`, 400,
			bad("Invalid input for field/attribute group. Value: " + sleeperID + "/members/" + sleeperID + ". '" + sleeperID +
				"/members/" + sleeperID + "' is not a 'uuid'")},
		{"same_host string not a uuid", "2.1", `{"server": {"name": "x", "flavorRef": "1", ` + img + `}, "os:scheduler_hints": {"same_host": "a/b"}}`, 400,
			bad("Invalid input for field/attribute same_host. Value: a/b. 'a/b' is not a 'uuid'")},
		{"unknown group", "2.1", `{"server": {"name": "x", "flavorRef": "1", ` + img + `}, "os:scheduler_hints": {"group": "` + bigID + `"}}`, 400,
			bad("Instance group " + bigID + " could not be found.")},
		{"no imageRef", "2.1", `{"server": {"name": "x", "flavorRef": "1"}}`, 400, bad("Missing imageRef attribute")},
		{"imageRef not a uuid", "2.1", `{"server": {"name": "x", "flavorRef": "1", "imageRef": "cirros"}}`, 400,
			bad("Invalid input for field/attribute imageRef. Value: cirros. 'cirros' is not valid under any of the given schemas")},
		{"unknown image", "2.1", `{"server": {"name": "x", "flavorRef": "1", "imageRef": "` + strings.Repeat("a", 32) + `"}}`, 400,
			bad("Can not find requested image")},
		{"unknown flavor", "2.1", `{"server": {"name": "x", "flavorRef": "42", ` + img + `}}`, 400, bad("Flavor 42 could not be found.")},
		{"flavor too small for the image", "2.1", `{"server": {"name": "x", "flavorRef": "1", "imageRef": "` + bigID + `"}}`, 400,
			bad("Flavor's memory is too small for requested image.")},
		{"key pair", "2.1", `{"server": {"name": "x", "flavorRef": "1", ` + img + `, "key_name": "mykey"}}`, 400, bad("Invalid key_name provided.")},
		{"security group", "2.1", `{"server": {"name": "x", "flavorRef": "1", ` + img + `, "security_groups": [{"name": "web"}]}}`, 400,
			bad("Security group web not found.")},
		{"a volume", "2.1", `{"server": {"name": "x", "flavorRef": "1", "block_device_mapping_v2": [{"source_type": "volume", "uuid": "v1", "boot_index": 0}]}}`, 400,
			bad("Volume v1 could not be found.")},
		{"a network", "2.37", `{"server": {"name": "x", "flavorRef": "1", ` + img + `, "networks": [{"uuid": "` + bigID + `"}]}}`, 400,
			bad("Network " + bigID + " could not be found.")},
		{"unknown zone", "2.1", `{"server": {"name": "x", "flavorRef": "1", ` + img + `, "availability_zone": "moon"}}`, 400,
			bad("The requested availability zone is not available")},
		{"zone:host and host", "2.74", `{"server": {"name": "x", "flavorRef": "1", ` + img + `, "networks": "none", "availability_zone": "nova:compute-1", "host": "compute-1"}}`, 400,
			bad("One mechanism with host and/or hypervisor_hostname and another mechanism with zone:host:node are mutually exclusive.")},
		{"unknown host", "2.74", `{"server": {"name": "x", "flavorRef": "1", ` + img + `, "networks": "none", "host": "compute-9"}}`, 400,
			bad("Compute host compute-9 could not be found.")},
		{"too many colons", "2.1", `{"server": {"name": "x", "flavorRef": "1", ` + img + `, "availability_zone": "a:b:c:d"}}`, 400,
			bad("Invalid input received: Unable to parse availability_zone")},
	}
	for _, tc := range cases {
		rec := a.do("POST", "/v2.1/servers", tc.body, mv(tc.version))
		if rec.Code != tc.status || rec.Body.String() != tc.want {
			t.Errorf("%s: %d %s\nwant %d %s", tc.desc, rec.Code, rec.Body, tc.status, tc.want)
		}
	}
	if all, err := a.api.servers.List(context.Background()); err != nil || len(all) != 0 {
		t.Errorf("refused creates stored %d servers (%v)", len(all), err)
	}
	// The group hint of an existing group stores its membership.
	rec := a.do("POST", "/v2.1/servers", `{"server": {"name": "x", "flavorRef": "1", `+img+`}, "os:scheduler_hints": {"group": "`+g.ServerGroup.ID+`"}}`)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("create in group %s: %d %s", g.ServerGroup.ID, rec.Code, rec.Body)
	}
	resp, err := a.cli.Get(context.Background(), a.keys.ServerGroupMembers(g.ServerGroup.ID), clientv3WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Errorf("group members after a create: %v %v", resp, err)
	}
}

// Without an image service, an imageRef is an image that cannot be found.
func TestServerCreateWithoutImageService(t *testing.T) {
	a := newTestAPI(t)
	a.expect(a.do("POST", "/v2.1/servers", fmt.Sprintf(`{"server": {"name": "x", "flavorRef": "1", "imageRef": %q}}`, sleeperID)),
		400, `{"badRequest": {"code": 400, "message": "Can not find requested image"}}`)
}

var _ = etcdschema.Cell0

func clientv3WithPrefix() clientv3.OpOption { return clientv3.WithPrefix() }

// zone:host forces a host (admin): the zone stays when the host is in
// it, and goes when it is not (_validate_host_availability_zone), and
// the BuildRequest says it was forced, so the scheduler skips its
// filters; 2.74's host is a requested destination, which does not.
func TestServerCreateForcedHost(t *testing.T) {
	a := newCreateAPI(t)
	now := time.Now().UTC()
	if _, err := a.cli.Put(context.Background(), a.keys.Service("compute-1"),
		etcdschema.MustEncode(&etcdschema.Service{Host: "compute-1", Cell: "cell1", CreatedAt: now, UpdatedAt: now})); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		az, host, wantZone, wantHost, wantNode string
		wantForced                             bool
	}{
		{"nova:compute-1", "", "nova", "compute-1", "", true},
		{"moon:compute-1", "", "", "compute-1", "", true},
		{"nova:compute-1:compute-1", "", "nova", "compute-1", "compute-1", true},
		{"nova::compute-1", "", "nova", "", "compute-1", true},
		{"nova", "compute-1", "nova", "compute-1", "", false},
	} {
		host := ""
		if tc.host != "" {
			host = `, "host": "` + tc.host + `"`
		}
		body := `{"server": {"name": "f", "flavorRef": "1", "imageRef": "` + sleeperID + `", "networks": "none", "availability_zone": "` + tc.az + `"` + host + `}}`
		rec := a.do("POST", "/v2.1/servers", body, mv("2.74"))
		var out struct {
			Server struct{ ID string } `json:"server"`
		}
		if rec.Code != http.StatusAccepted || json.Unmarshal(rec.Body.Bytes(), &out) != nil {
			t.Fatalf("%s: %d %s", tc.az, rec.Code, rec.Body)
		}
		v, err := a.api.servers.Lookup(context.Background(), out.Server.ID)
		if err != nil {
			t.Fatal(err)
		}
		br := v.BuildRequest
		if br.AvailabilityZone != tc.wantZone || br.Host != tc.wantHost || br.Node != tc.wantNode || br.Forced != tc.wantForced {
			t.Errorf("%s host %q: zone %q host %q node %q forced %v; want %q %q %q %v", tc.az, tc.host, br.AvailabilityZone, br.Host, br.Node,
				br.Forced, tc.wantZone, tc.wantHost, tc.wantNode, tc.wantForced)
		}
	}
}
