package images

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/compute"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/etcdtest"
)

func newTestStore(t *testing.T) *Store {
	t.Helper()
	return NewStore(etcdtest.Client(t), etcdschema.New("/test"))
}

func ptr(s string) *string { return &s }

// testImage is an active image named name created at minute min.
func testImage(name string, min int) *Image {
	at := time.Date(2026, 11, 26, 9, min, 0, 0, time.UTC)
	return &Image{ID: DefaultID("test-" + name), Name: ptr(name), Status: StatusActive,
		Visibility: VisibilityPublic, CreatedAt: at, UpdatedAt: at}
}

func TestParseCommand(t *testing.T) {
	cases := []struct {
		desc, in string
		want     []string
		bad      string // part of the error
	}{
		{desc: "program and arguments", in: `["sleep", "infinity"]`, want: []string{"sleep", "infinity"}},
		{desc: "an argument with spaces needs no quoting", in: `["/bin/sh","-c","echo a b"]`, want: []string{"/bin/sh", "-c", "echo a b"}},
		{desc: "a plain string is not a list", in: `sleep infinity`, bad: "is not a JSON list of strings"},
		{desc: "numbers are not strings", in: `["sleep", 3]`, bad: "is not a JSON list of strings"},
		{desc: "empty list", in: `[]`, bad: "the list is empty"},
		{desc: "empty program", in: `["", "x"]`, bad: "the program (the first string) is empty"},
		{desc: "NUL in an argument", in: `["echo", "a\u0000b"]`, bad: "string 1 holds a NUL character"},
		{desc: "text after the list", in: `["a"] ["b"]`, bad: "has text after the list"},
		{desc: "too long", in: `["` + strings.Repeat("x", maxCommandBytes) + `"]`, bad: "more than 4096"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := ParseCommand(tc.in)
			if tc.bad != "" {
				if !errors.Is(err, ErrBadCommand) || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("ParseCommand(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.bad)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("ParseCommand(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			if back, err := ParseCommand(FormatCommand(got)); err != nil || !slices.Equal(back, got) {
				t.Errorf("FormatCommand(%q) = %s does not parse back: %q, %v", got, FormatCommand(got), back, err)
			}
		})
	}
	if s := FormatCommand([]string{"a<b>&c"}); s != `["a<b>&c"]` {
		t.Errorf("FormatCommand escaped HTML characters: %s", s)
	}
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	sleeper := testImage("sleeper", 1)
	sleeper.Command = []string{"sleep", "60"}
	guarded := testImage("guarded", 2)
	guarded.Protected = true
	for _, img := range []*Image{sleeper, guarded} {
		if err := s.Create(ctx, img); err != nil {
			t.Fatalf("create %s: %v", *img.Name, err)
		}
	}
	steps := []struct {
		desc string
		do   func() error
		want error // nil, a sentinel, or any error (errAny)
	}{
		{"a second create of an id is a duplicate", func() error { return s.Create(ctx, testImage("sleeper", 3)) }, ErrDuplicate},
		{"an id that is not a UUID is refused", func() error {
			img := testImage("x", 3)
			img.ID = "../flavors/m1.tiny"
			return s.Create(ctx, img)
		}, errAny},
		{"an unknown visibility is refused", func() error {
			img := testImage("vis", 3)
			img.Visibility = "everyone"
			return s.Create(ctx, img)
		}, errAny},
		{"a bad command is refused", func() error {
			img := testImage("bad", 3)
			img.Command = []string{""}
			return s.Create(ctx, img)
		}, ErrBadCommand},
		{"berth_command may not hide among the properties", func() error {
			img := testImage("hidden", 3)
			img.Properties = map[string]string{CommandProperty: `["sh"]`}
			return s.Create(ctx, img)
		}, errAny},
		{"a protected image is not deleted", func() error { return s.Delete(ctx, guarded.ID, nil) }, ErrProtected},
		{"a missing image is not found", func() error { return s.Delete(ctx, DefaultID("nobody"), nil) }, ErrNotFound},
		{"a key-breaking id is not found", func() error { _, err := s.Get(ctx, "a/b"); return err }, ErrNotFound},
		{"the delete's own check can refuse", func() error {
			return s.Delete(ctx, sleeper.ID, func(*Image) error { return errRefused })
		}, errRefused},
		{"an update keeps the id", func() error {
			_, err := s.Update(ctx, sleeper.ID, func(img *Image) error { img.ID = DefaultID("other"); return nil })
			return err
		}, errAny},
		{"unprotecting lets the delete through", func() error {
			if _, err := s.Update(ctx, guarded.ID, func(img *Image) error { img.Protected = false; return nil }); err != nil {
				return err
			}
			return s.Delete(ctx, guarded.ID, nil)
		}, nil},
	}
	for _, st := range steps {
		err := st.do()
		switch {
		case st.want == nil && err != nil:
			t.Errorf("%s: %v", st.desc, err)
		case st.want == errAny && err == nil:
			t.Errorf("%s: no error", st.desc)
		case st.want != nil && st.want != errAny && !errors.Is(err, st.want):
			t.Errorf("%s: %v, want %v", st.desc, err, st.want)
		}
	}
	all, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].ID != sleeper.ID || !slices.Equal(all[0].Command, []string{"sleep", "60"}) {
		t.Errorf("List = %+v, want the sleeper alone with its command", all)
	}
}

var (
	errAny     = errors.New("any error")
	errRefused = errors.New("refused")
)

// TestCatalog: the store is the compute API's image catalog, and what it
// hands over is what a server runs.
func TestCatalog(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	img := testImage("sleeper", 1)
	img.Command, img.MinRAMMB, img.MinDiskGB = []string{"sleep", "60"}, 64, 1
	if err := s.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	var cat compute.ImageCatalog = s
	anyone := identity.Credentials{ProjectID: "p0", Roles: []string{"reader"}}
	got, err := cat.Image(ctx, anyone, img.ID)
	want := compute.Image{ID: img.ID, Name: "sleeper", Command: []string{"sleep", "60"}, MinRAMMB: 64, MinDiskGB: 1}
	if err != nil || got.ID != want.ID || got.Name != want.Name || !slices.Equal(got.Command, want.Command) ||
		got.MinRAMMB != 64 || got.MinDiskGB != 1 {
		t.Errorf("Image = %+v, %v; want %+v", got, err, want)
	}
	for _, id := range []string{DefaultID("absent"), "not-a-uuid", "../x"} {
		if _, err := cat.Image(ctx, anyone, id); !errors.Is(err, compute.ErrImageNotFound) {
			t.Errorf("Image(%q) = %v, want compute.ErrImageNotFound", id, err)
		}
	}

	private := testImage("private", 2)
	private.Visibility, private.Owner = VisibilityPrivate, ptr("p1")
	if err := s.Create(ctx, private); err != nil {
		t.Fatal(err)
	}
	reader := func(project string) identity.Credentials {
		return identity.Credentials{ProjectID: project, Roles: []string{"reader"}}
	}
	for _, tc := range []struct {
		desc  string
		creds identity.Credentials
		id    string
		found bool
	}{
		{"the owner's reader", reader("p1"), private.ID, true},
		{"another project", reader("p2"), private.ID, false},
		{"an admin of another project", identity.Credentials{ProjectID: "p2", Roles: []string{"admin", "member", "reader"}}, private.ID, true},
		{"a public image to anyone with a role", reader("p2"), img.ID, true},
		{"nothing without a role", identity.Credentials{ProjectID: "p2"}, img.ID, false},
	} {
		_, err := s.Image(ctx, tc.creds, tc.id)
		if found := err == nil; found != tc.found || (err != nil && !errors.Is(err, compute.ErrImageNotFound)) {
			t.Errorf("Image, %s: %v, want found %v", tc.desc, err, tc.found)
		}
	}
}

// TestEnsureDefaults: the defaults are created once, with fixed ids, and
// an operator's change to one survives the next start.
func TestEnsureDefaults(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	if err := EnsureDefaults(ctx, s.cli, s.keys, Defaults(now)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, DefaultID(DefaultSleepImage), func(img *Image) error { img.Protected = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDefaults(ctx, s.cli, s.keys, Defaults(now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*Image{}
	for i := range all {
		got[*all[i].Name] = &all[i]
	}
	sleep, fake := got[DefaultSleepImage], got[DefaultFakeImage]
	if len(all) != 2 || sleep == nil || fake == nil {
		t.Fatalf("defaults = %v", got)
	}
	if !sleep.Protected || !sleep.CreatedAt.Equal(now) {
		t.Errorf("the second start rewrote berth-sleep: %+v", sleep)
	}
	if !slices.Equal(sleep.Command, []string{"sleep", "infinity"}) || fake.Command != nil {
		t.Errorf("commands: berth-sleep %q, berth-fake %q", sleep.Command, fake.Command)
	}
	if sleep.ID != "" && sleep.ID == fake.ID {
		t.Errorf("defaults share an id")
	}
	if want := fmt.Sprint(DefaultID(DefaultSleepImage)); sleep.ID != want {
		t.Errorf("berth-sleep id %s, want %s", sleep.ID, want)
	}
}

// TestConcurrentUpdatesLoseNothing: racing updates of one image, each
// adding its own property, all land: an update commits only over the
// revision it read, and one that lost reads again.
func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	img := testImage("busy", 1)
	if err := s.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	const racers = 8
	errs := make(chan error, racers)
	for i := range racers {
		go func() {
			_, err := s.Update(ctx, img.ID, func(im *Image) error {
				if im.Properties == nil {
					im.Properties = map[string]string{}
				}
				im.Properties[fmt.Sprintf("p%d", i)] = "set"
				return nil
			})
			errs <- err
		}()
	}
	for range racers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	got, err := s.Get(ctx, img.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Properties) != racers {
		t.Errorf("properties after %d racing updates: %v", racers, got.Properties)
	}
}
