package compute

import (
	"encoding/json"
	"os"
	"testing"
)

// TestServerValidationMatchesNova checks the servers' create and list
// schemas against the messages Nova 26's own validator gave for the same
// instances, recorded by testdata/nova_servers_validation.py.
func TestServerValidationMatchesNova(t *testing.T) {
	raw, err := os.ReadFile("testdata/nova_servers_validation.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []json.RawMessage
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	query := func(minor int) schema { s, _ := serversQuery(version{minor}); return s }
	schemas := map[string]struct {
		s     schema
		query bool
	}{
		"create_2.1": {s: serverCreate(version{1})}, "create_2.19": {s: serverCreate(version{19})},
		"create_2.37": {s: serverCreate(version{37})}, "create_2.74": {s: serverCreate(version{74})},
		"create_2.90": {s: serverCreate(version{90})},
		"query_2.1":   {s: query(1), query: true}, "query_2.66": {s: query(66), query: true},
		"query_2.75":         {s: query(75), query: true},
		"actions_query_2.58": {s: instanceActionsQuery(version{58}), query: true},
		"actions_query_2.66": {s: instanceActionsQuery(version{66}), query: true},
	}
	if len(cases) < 90 {
		t.Fatalf("only %d recorded cases", len(cases))
	}
	for i, c := range cases {
		v, err := decodeOrdered(c)
		if err != nil {
			t.Fatal(err)
		}
		row := v.([]any)
		name, inst := row[0].(string), row[1]
		want, _ := row[2].(string)
		sc, ok := schemas[name]
		if !ok {
			t.Fatalf("case %d: unknown schema %s", i, name)
		}
		got := ""
		if e := sc.s.check(inst, nil); e != nil {
			got = e.bodyError()
			if sc.query {
				got = e.queryError()
			}
		}
		if got != want {
			t.Errorf("case %d (%s, %.100s):\n got %q\nwant %q", i, name, pyRepr(inst), got, want)
		}
	}
}
