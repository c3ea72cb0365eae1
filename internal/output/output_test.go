package output

import (
	"bytes"
	"errors"
	"testing"

	"github.com/berth-project/berth/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

var servers = List{
	Columns: []string{"id", "name", "status", "host", "hints"},
	Rows: [][]any{
		{"a1", "web-1", "ACTIVE", "compute-1", map[string]string{"group": "g", "a": "<b>&"}},
		{"b2", "web-2", "ERROR", nil, []string{"x", "y"}},
	},
}

func TestWriteList(t *testing.T) {
	for _, tc := range []struct {
		desc string
		o    Options
		l    List
		want string
	}{
		{desc: "table", o: Options{Format: Table}, l: servers, want: "" +
			"ID  NAME   STATUS  HOST       HINTS\n" +
			"a1  web-1  ACTIVE  compute-1  a=<b>&,group=g\n" +
			"b2  web-2  ERROR   -          x,y\n"},
		{desc: "table, two columns in the command's order whatever -c's", o: Options{Format: Table, Columns: []string{"STATUS", "id"}}, l: servers, want: "" +
			"ID  STATUS\n" +
			"a1  ACTIVE\n" +
			"b2  ERROR\n"},
		{desc: "value", o: Options{Format: Value, Columns: []string{"id", "host"}}, l: servers, want: "a1 compute-1\nb2 \n"},
		{desc: "json keeps order and does not escape HTML", o: Options{Format: JSON, Columns: []string{"name", "hints"}}, l: servers, want: `[
  {
    "name": "web-1",
    "hints": {
      "a": "<b>&",
      "group": "g"
    }
  },
  {
    "name": "web-2",
    "hints": [
      "x",
      "y"
    ]
  }
]
`},
		{desc: "json of nothing is an empty array", o: Options{Format: JSON}, l: List{Columns: []string{"id"}}, want: "[]\n"},
		{desc: "yaml", o: Options{Format: YAML, Columns: []string{"id", "host"}}, l: servers, want: "- id: a1\n  host: compute-1\n- id: b2\n  host: null\n"},
		{desc: "yaml of nothing", o: Options{Format: YAML}, l: List{Columns: []string{"id"}}, want: "[]\n"},
		{desc: "table of nothing is its header", o: Options{Format: Table}, l: List{Columns: []string{"id", "name"}}, want: "ID  NAME\n"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.o.WriteList(&b, tc.l); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

func TestWriteRecord(t *testing.T) {
	r := Record{Fields: []string{"id", "name", "fault", "count"}, Values: []any{"a1", "web", "No valid host\nwas found", 3}}
	for _, tc := range []struct {
		desc string
		o    Options
		want string
	}{
		{desc: "table", o: Options{Format: Table}, want: "id     a1\nname   web\nfault  No valid host was found\ncount  3\n"},
		{desc: "value", o: Options{Format: Value, Columns: []string{"count", "id"}}, want: "a1\n3\n"},
		{desc: "json", o: Options{Format: JSON, Columns: []string{"id", "count"}}, want: "{\n  \"id\": \"a1\",\n  \"count\": 3\n}\n"},
		{desc: "yaml", o: Options{Format: YAML, Columns: []string{"fault"}}, want: "fault: |-\n  No valid host\n  was found\n"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.o.WriteRecord(&b, r); err != nil {
				t.Fatal(err)
			}
			if b.String() != tc.want {
				t.Errorf("got\n%q\nwant\n%q", b.String(), tc.want)
			}
		})
	}
}

func TestUnknownColumn(t *testing.T) {
	err := Options{Format: Table, Columns: []string{"id", "nope"}}.WriteList(&bytes.Buffer{}, servers)
	var uc *UnknownColumnError
	if !errors.As(err, &uc) || uc.Column != "nope" || err.Error() != `no column "nope" (columns: id, name, status, host, hints)` {
		t.Fatalf("err = %v, want an UnknownColumnError naming the columns", err)
	}
}

func TestParseFormat(t *testing.T) {
	for _, s := range Formats {
		if f, err := ParseFormat(s); err != nil || string(f) != s {
			t.Errorf("ParseFormat(%q) = %q, %v", s, f, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil || err.Error() != `unknown output format "xml" (want table, json, yaml, value)` {
		t.Errorf("ParseFormat(xml) = %v", err)
	}
}
