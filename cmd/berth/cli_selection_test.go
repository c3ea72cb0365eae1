package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/berth-project/berth/api"
)

// TestSelectionRows: selection show prints one row for the server, one
// per attempt and one per alternate, in every format alike; the table
// below is what an operator reads after a failed first try.
func TestSelectionRows(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 30, 0, 0, time.UTC)
	const id = "6d4f2f8e-3c1a-4e5b-9a57-0c2f1d7b8a11"
	retrying := &api.SelectionView{Instance: id, Status: "BUILD", Cell: "cell1", AttemptsMade: 1, MaxAttempts: 3, Kept: true,
		Attempts:   []api.AttemptView{{Host: "compute-3", Reason: "Build of instance failed: disk full", At: at}},
		Alternates: []api.AlternateHostView{{Host: "compute-1", Node: "compute-1", Cell: "cell1"}, {Host: "compute-5", Node: "compute-5", Cell: "cell1"}}}
	cases := []struct {
		desc    string
		sel     *api.SelectionView
		format  string
		columns []string
		want    string
	}{
		{desc: "a retry under way, as a table", sel: retrying, format: "table", want: "" +
			"INSTANCE                              STATUS  KIND       N  HOST       NODE       CELL   AT                    REASON\n" +
			id + "  BUILD   server     1  -          -          cell1  -                     alternates kept; at most 3 attempts\n" +
			id + "  BUILD   attempt    1  compute-3  -          -      2026-11-26T09:30:00Z  Build of instance failed: disk full\n" +
			id + "  BUILD   alternate  1  compute-1  compute-1  cell1  -                     -\n" +
			id + "  BUILD   alternate  2  compute-5  compute-5  cell1  -                     -\n"},
		{desc: "the same rows as values of chosen columns", sel: retrying, format: "value", columns: []string{"kind", "n", "host"},
			want: "server 1 \nattempt 1 compute-3\nalternate 1 compute-1\nalternate 2 compute-5\n"},
		{desc: "an ACTIVE server keeps nothing", format: "value", columns: []string{"kind", "host", "reason"},
			sel:  &api.SelectionView{Instance: id, Status: "ACTIVE", Host: "compute-2", Cell: "cell2", AttemptsMade: 1},
			want: "server compute-2 no alternates kept (the server is ACTIVE, deleted, or was never scheduled)\n"},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		p := &printer{s: &streams{out: &out}, format: tc.format, columns: tc.columns, known: selectionColumns}
		if err := p.list(selectionRows(tc.sel)); err != nil {
			t.Fatalf("%s: %v", tc.desc, err)
		}
		if got := out.String(); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.desc, got, tc.want)
		}
	}
}
