package compute_test

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/compute"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/images"
	"github.com/berth-project/berth/internal/etcdtest"
)

// A create resolves imageRef through the image service's real store
// (package images, which imports compute: so this test is outside the
// package): a default image boots with its command, an image's min_ram
// is checked against the flavor, and an id the store does not hold is
// Nova's 400. The in-package tests use a small catalog of their own.
func TestServerCreateFromImageStore(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/images-create")
	if err := api.EnsureFlavors(ctx, cli, keys, api.DefaultFlavors()); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := images.EnsureDefaults(ctx, cli, keys, images.Defaults(now)); err != nil {
		t.Fatal(err)
	}
	store := images.NewStore(cli, keys)
	bigID, big := "c0ffee00-1111-4222-8333-444444444444", "big"
	if err := store.Create(ctx, &etcdschema.Image{ID: bigID, Name: &big, Status: images.StatusActive,
		Visibility: images.VisibilityPublic, MinRAMMB: 4096, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	nova := compute.New(cli, keys, hclog.NewNullLogger())
	nova.SetImages(store)
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("X-Auth-Token", "admin:admin")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		nova.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	create := func(image string) (int, string) {
		return do("POST", "/v2.1/servers", `{"server": {"name": "s", "flavorRef": "1", "imageRef": "`+image+`"}}`)
	}

	sleep := images.DefaultID(images.DefaultSleepImage)
	code, body := create(sleep)
	var out struct{ Server struct{ ID string } }
	if code != http.StatusAccepted || json.Unmarshal([]byte(body), &out) != nil {
		t.Fatalf("create from %s: %d %s", images.DefaultSleepImage, code, body)
	}
	resp, err := cli.Get(ctx, keys.BuildRequest(out.Server.ID))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("build request %s: %v", out.Server.ID, err)
	}
	var br etcdschema.BuildRequest
	if err := etcdschema.Decode(string(resp.Kvs[0].Key), resp.Kvs[0].Value, &br); err != nil {
		t.Fatal(err)
	}
	if br.Image == nil || br.Image.ID != sleep || br.Image.Name != images.DefaultSleepImage ||
		strings.Join(br.Image.Command, " ") != "sleep infinity" {
		t.Errorf("the build request boots %+v, want %s running sleep infinity", br.Image, images.DefaultSleepImage)
	}
	if code, body := do("GET", "/v2.1/servers/"+out.Server.ID, ""); code != 200 || !strings.Contains(body, `"image": {"id": "`+sleep+`"`) {
		t.Errorf("show: %d %s", code, body)
	}

	bad := func(msg string) string { return `{"badRequest": {"code": 400, "message": "` + msg + `"}}` }
	for _, tc := range []struct{ desc, image, want string }{
		{"min_ram above m1.tiny's", bigID, bad("Flavor's memory is too small for requested image.")},
		{"no such image", "0badc0de-1111-4222-8333-444444444444", bad("Can not find requested image")},
	} {
		if code, body := create(tc.image); code != 400 || body != tc.want {
			t.Errorf("%s: %d %s\nwant 400 %s", tc.desc, code, body, tc.want)
		}
	}
}

// A create sees images as its caller does (Nova asks Glance with the
// user's token): another project's private image is Nova's 400 "Can not
// find requested image", exactly as one that does not exist, while its
// owner's members and any admin boot it, and a public image is anyone's.
func TestServerCreateSeesImagesAsTheCaller(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/images-caller")
	if err := api.EnsureFlavors(ctx, cli, keys, api.DefaultFlavors()); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := images.EnsureDefaults(ctx, cli, keys, images.Defaults(now)); err != nil {
		t.Fatal(err)
	}
	store := images.NewStore(cli, keys)
	privID, name, owner := "0a0a0a0a-1111-4222-8333-444444444444", "pa-only", "pa"
	if err := store.Create(ctx, &etcdschema.Image{ID: privID, Name: &name, Status: images.StatusActive,
		Visibility: images.VisibilityPrivate, Owner: &owner, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	nova := compute.New(cli, keys, hclog.NewNullLogger())
	nova.SetImages(store)
	public := images.DefaultID(images.DefaultFakeImage)
	notFound := `{"badRequest": {"code": 400, "message": "Can not find requested image"}}`
	for _, tc := range []struct {
		desc, token, image string
		want               int
	}{
		{"the owner's member", "alice:pa", privID, http.StatusAccepted},
		{"another project's member", "bob:pb", privID, http.StatusBadRequest},
		{"an admin of another project", "admin:pb", privID, http.StatusAccepted},
		{"a public image, to another project", "bob:pb", public, http.StatusAccepted},
	} {
		req := httptest.NewRequest("POST", "/v2.1/servers",
			strings.NewReader(`{"server": {"name": "s", "flavorRef": "1", "imageRef": "`+tc.image+`"}}`))
		req.Header.Set("X-Auth-Token", tc.token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		nova.ServeHTTP(rec, req)
		if rec.Code != tc.want || (tc.want == http.StatusBadRequest && rec.Body.String() != notFound) {
			t.Errorf("%s: %d %s, want %d", tc.desc, rec.Code, rec.Body, tc.want)
		}
	}
}

// A create may check its flavor and image as an earlier create read them
// (images.Store and the flavor store remember them), yet its answer is
// exact: each change below is made by another process's store (or, for
// the flavor, through the API), and the next create answers as one that
// read both records afresh — accepting what the change now allows and
// refusing what it no longer does, with nothing stored for a refusal.
func TestServerCreateSeesImageAndFlavorChangesAtOnce(t *testing.T) {
	ctx := context.Background()
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/images-changes")
	if err := api.EnsureFlavors(ctx, cli, keys, api.DefaultFlavors()); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	store, other := images.NewStore(cli, keys), images.NewStore(cli, keys)
	id, name := "5e5e5e5e-1111-4222-8333-444444444444", "changing"
	if err := other.Create(ctx, &etcdschema.Image{ID: id, Name: &name, Status: images.StatusActive,
		Visibility: images.VisibilityPublic, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	nova := compute.New(cli, keys, hclog.NewNullLogger())
	nova.SetImages(store)
	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("X-Auth-Token", token)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		nova.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	change := func(f func(*etcdschema.Image)) func() {
		return func() {
			if _, err := other.Update(ctx, id, func(img *etcdschema.Image) error { f(img); return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	bad := func(msg string) string { return `{"badRequest": {"code": 400, "message": "` + msg + `"}}` }
	accepted := 0
	for _, tc := range []struct {
		desc   string
		change func()
		token  string
		want   string // "" for 202
	}{
		{"first create: reads and remembers both", func() {}, "bob:pb", ""},
		{"min_ram raised past m1.tiny's", change(func(img *etcdschema.Image) { img.MinRAMMB = 4096 }), "bob:pb",
			bad("Flavor's memory is too small for requested image.")},
		{"min_ram lowered again", change(func(img *etcdschema.Image) { img.MinRAMMB = 0 }), "bob:pb", ""},
		{"made another project's private image", change(func(img *etcdschema.Image) {
			owner := "pa"
			img.Visibility, img.Owner = images.VisibilityPrivate, &owner
		}), "bob:pb", bad("Can not find requested image")},
		{"made public again", change(func(img *etcdschema.Image) { img.Visibility = images.VisibilityPublic }), "bob:pb", ""},
		{"image deleted", func() {
			if err := other.Delete(ctx, id, nil); err != nil {
				t.Fatal(err)
			}
		}, "bob:pb", bad("Can not find requested image")},
	} {
		tc.change()
		code, body := do("POST", "/v2.1/servers", tc.token, `{"server": {"name": "s", "flavorRef": "1", "imageRef": "`+id+`"}}`)
		switch {
		case tc.want == "" && code == http.StatusAccepted:
			accepted++
		case tc.want == "" || code != http.StatusBadRequest || body != tc.want:
			t.Errorf("%s: %d %s, want %s", tc.desc, code, body, cmp.Or(tc.want, "202"))
		}
	}

	// The flavor: remembered by the creates above, then deleted.
	sleep := images.DefaultID(images.DefaultSleepImage)
	if err := images.EnsureDefaults(ctx, cli, keys, images.Defaults(now)); err != nil {
		t.Fatal(err)
	}
	if code, body := do("DELETE", "/v2.1/flavors/1", "admin:admin", ""); code != http.StatusAccepted {
		t.Fatalf("delete flavor 1: %d %s", code, body)
	}
	code, body := do("POST", "/v2.1/servers", "bob:pb", `{"server": {"name": "s", "flavorRef": "1", "imageRef": "`+sleep+`"}}`)
	if want := bad("Flavor 1 could not be found."); code != http.StatusBadRequest || body != want {
		t.Errorf("after flavor 1 went: %d %s, want 400 %s", code, body, want)
	}
	resp, err := cli.Get(ctx, keys.BuildRequests(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != int64(accepted) || accepted != 3 {
		t.Errorf("%v build requests stored (%v), want one per accepted create: %d of 3", resp.Count, err, accepted)
	}
}
