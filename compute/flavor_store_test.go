package compute

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
)

// TestConcurrentCreatesKeepIDsAndNamesUnique: racing creates that share
// an id (under different names, so different keys) or a name: exactly
// one of each race wins and the others get Nova's 409. The name is the
// key, so a shared name is settled by the key's create revision; a
// shared id only by the compare on the whole prefix's mod revision,
// which this would catch missing.
func TestConcurrentCreatesKeepIDsAndNamesUnique(t *testing.T) {
	a := newTestAPI(t)
	const racers = 8
	for _, race := range []struct {
		desc string
		body func(i int) string
		lost string
	}{
		{"one id, different names", func(i int) string {
			return fmt.Sprintf(`{"flavor": {"name": "same-id-%d", "ram": 1, "vcpus": 1, "disk": 0, "id": "shared"}}`, i)
		}, "Flavor with ID shared already exists."},
		{"one name, different ids", func(i int) string {
			return fmt.Sprintf(`{"flavor": {"name": "same-name", "ram": 1, "vcpus": 1, "disk": 0, "id": "n%d"}}`, i)
		}, "Flavor with name same-name already exists."},
	} {
		t.Run(race.desc, func(t *testing.T) {
			codes := make([]int, racers)
			bodies := make([]string, racers)
			var wg sync.WaitGroup
			for i := range racers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rec := a.do("POST", "/v2.1/flavors", race.body(i))
					codes[i], bodies[i] = rec.Code, rec.Body.String()
				}()
			}
			wg.Wait()
			won := 0
			for i := range racers {
				switch {
				case codes[i] == 200:
					won++
				case codes[i] != 409 || !strings.Contains(bodies[i], race.lost):
					t.Errorf("racer %d: %d %s", i, codes[i], bodies[i])
				}
			}
			if won != 1 {
				t.Errorf("%d creates won, want exactly 1", won)
			}
		})
	}
	rec := a.do("GET", "/v2.1/flavors?is_public=none", "")
	if n := strings.Count(rec.Body.String(), `"id": "shared"`); n != 1 {
		t.Errorf("%d flavors with id shared: %s", n, rec.Body)
	}
	if n := strings.Count(rec.Body.String(), `"name": "same-name"`); n != 1 {
		t.Errorf("%d flavors named same-name: %s", n, rec.Body)
	}
}

// TestFlavorListReusesDecodedRecordsSafely: the list copies a record it
// decoded before when its mod revision is unchanged, and what a caller
// changes in a flavor it got never reaches the next caller; an updated
// record is decoded again, a deleted one is gone.
func TestFlavorListReusesDecodedRecordsSafely(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/fl")
	s := &flavorStore{cli: cli, keys: keys}
	ctx := context.Background()
	desc := "small"
	if err := s.create(ctx, &etcdschema.Flavor{ID: "1", Name: "a", VCPUs: 1, ExtraSpecs: map[string]string{"k": "v"},
		Description: &desc, Projects: []string{"p"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.create(ctx, &etcdschema.Flavor{ID: "2", Name: "b", VCPUs: 2}); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		desc   string
		change func(t *testing.T)
		want   map[string]int // id -> vcpus
		spec   string         // flavor 1's extra spec k
	}{
		{desc: "first list decodes", want: map[string]int{"1": 1, "2": 2}, spec: "v"},
		{desc: "a caller's changes stay its own", change: func(t *testing.T) {
			f, err := s.get(ctx, "1")
			if err != nil {
				t.Fatal(err)
			}
			f.ExtraSpecs["k"] = "changed"
			*f.Description = "changed"
			f.Projects[0] = "changed"
			f.VCPUs = 99
		}, want: map[string]int{"1": 1, "2": 2}, spec: "v"},
		{desc: "an update is decoded again", change: func(t *testing.T) {
			if _, err := s.update(ctx, "2", func(f *etcdschema.Flavor) error { f.VCPUs = 4; return nil }); err != nil {
				t.Fatal(err)
			}
		}, want: map[string]int{"1": 1, "2": 4}, spec: "v"},
		{desc: "a delete is gone", change: func(t *testing.T) {
			if err := s.delete(ctx, "2"); err != nil {
				t.Fatal(err)
			}
		}, want: map[string]int{"1": 1}, spec: "v"},
	}
	for _, st := range steps {
		t.Run(st.desc, func(t *testing.T) {
			if st.change != nil {
				st.change(t)
			}
			all, _, err := s.list(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, f := range all {
				got[f.ID] = f.VCPUs
				if f.ID == "1" && (f.ExtraSpecs["k"] != st.spec || *f.Description != desc || f.Projects[0] != "p") {
					t.Errorf("flavor 1 is %+v", f.Flavor)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(st.want) {
				t.Errorf("flavors %v, want %v", got, st.want)
			}
			s.mu.Lock()
			cached := len(s.decoded)
			s.mu.Unlock()
			if cached != len(st.want) {
				t.Errorf("%d records kept decoded, want %d", cached, len(st.want))
			}
		})
	}
}
