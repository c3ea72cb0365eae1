package servers

import (
	"context"
	"slices"
	"testing"

	"github.com/berth-project/berth/etcdschema"
)

// Page walks every server once, in id order, whether it is still a
// BuildRequest or an instance in a cell, a page at a time; a filter
// fills each page with the servers it keeps.
func TestPageWalksEveryServerOnce(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	res, err := s.Create(ctx, CreateRequest{Name: "web", Count: 2*pageRead + 30, ProjectID: "p", UserID: "u",
		Flavor: etcdschema.Flavor{ID: "1", Name: "m1.tiny"}})
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	// Every third server is scheduled: its instance in cell1, ACTIVE.
	active := map[string]bool{}
	for i, br := range res.BuildRequests {
		id := br.InstanceUUID
		all = append(all, id)
		if i%3 != 0 {
			continue
		}
		active[id] = true
		in := &etcdschema.Instance{UUID: id, Name: br.Name, Cell: "cell1", Status: etcdschema.StatusActive}
		m := &etcdschema.InstanceMapping{InstanceUUID: id, Cell: "cell1", ProjectID: "p"}
		for key, v := range map[string]etcdschema.Versioned{s.keys.CellInstance("cell1", id): in, s.keys.InstanceMapping(id): m} {
			if _, err := s.cli.Put(ctx, key, etcdschema.MustEncode(v)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.cli.Delete(ctx, s.keys.BuildRequest(id)); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(all)
	isActive := func(v *Server) bool { return v.Instance != nil && v.Instance.Status == etcdschema.StatusActive }
	for _, tc := range []struct {
		name  string
		limit int
		keep  func(*Server) bool
		want  func(id string) bool
	}{
		{"every server, pages of 7", 7, nil, func(string) bool { return true }},
		{"every server, pages larger than a read", pageRead + 1, nil, func(string) bool { return true }},
		{"ACTIVE only, pages of 50", 50, isActive, func(id string) bool { return active[id] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			marker, pages := "", 0
			for {
				page, next, err := s.Page(ctx, marker, tc.limit, tc.keep)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if len(page) > tc.limit || (next != "" && len(page) != tc.limit) {
					t.Fatalf("page %d: %d servers, next %q; want at most %d and next only on a full page", pages, len(page), next, tc.limit)
				}
				for _, v := range page {
					got = append(got, v.ID())
				}
				if next == "" {
					break
				}
				marker = next
			}
			want := slices.DeleteFunc(slices.Clone(all), func(id string) bool { return !tc.want(id) })
			if !slices.Equal(got, want) {
				t.Fatalf("walked %d servers in %d pages, want %d in id order:\ngot  %v\nwant %v", len(got), pages, len(want), got, want)
			}
		})
	}
	if _, _, err := s.Page(ctx, "", 0, nil); err == nil {
		t.Error("Page with limit 0 succeeded; want an error")
	}
}
