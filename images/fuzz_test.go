package images

import (
	"encoding/json"
	"net/url"
	"slices"
	"testing"
)

// FuzzParseCommand: whatever the text, ParseCommand answers without
// panicking, and what it accepts formats back to the same argv.
func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{`["sleep", "infinity"]`, `[]`, `[""]`, `"x"`, `["a\u0000"]`, `[1]`, `["a"] x`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		argv, err := ParseCommand(s)
		if err != nil {
			return
		}
		back, err := ParseCommand(FormatCommand(argv))
		if err != nil || !slices.Equal(back, argv) {
			t.Fatalf("%q parsed to %q, which formats to %s and parses back to %q, %v", s, argv, FormatCommand(argv), back, err)
		}
	})
}

// FuzzParseList: any query is parsed or refused with a 400, never a
// panic; what parses selects a page no longer than its limit.
func FuzzParseList(f *testing.F) {
	for _, s := range []string{"limit=2&marker=x", "sort=name:asc,id", "sort_key=name&sort_dir=asc&sort_dir=desc",
		`name=in:"a,b",c`, "created_at=gte:2026-01-01T00:00:00Z", "visibility=all&tag=x&os_hidden=TRUE", "size_min=1"} {
		f.Add(s)
	}
	imgs := []Image{*testImage("a", 1), *testImage("b", 2), *testImage("c", 3)}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		lq, e := parseList(q)
		if e != nil {
			if e.status != 400 {
				t.Fatalf("%q: %d, want a 400", raw, e.status)
			}
			return
		}
		page, more, e := selectPage(imgs, caller{admin: true}, lq)
		if e != nil {
			if e.status != 400 {
				t.Fatalf("%q: %d, want a 400", raw, e.status)
			}
			return
		}
		if len(page) > lq.limit {
			t.Fatalf("%q: %d images past the limit %d", raw, len(page), lq.limit)
		}
		var v any
		if err := json.Unmarshal(dumps(listView(page, raw, more)), &v); err != nil {
			t.Fatalf("%q: the list view is not JSON: %v", raw, err)
		}
	})
}
