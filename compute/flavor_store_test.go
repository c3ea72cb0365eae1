package compute

import (
	"fmt"
	"strings"
	"sync"
	"testing"
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
