package etcdschema

import (
	"math/rand"
	"testing"
	"time"
)

// timeMatches fails t unless parseTime(s) is exactly UnmarshalText(s):
// the same error text, and an equal value: equal as a struct where the
// fast path read it (UTC, no location pointer), else the same instant in
// the same zone (an offset's zone is a new *Location per parse).
func timeMatches(t *testing.T, s []byte) {
	t.Helper()
	if len(s) == len("2006-01-02T15:04:05.999999999Z") && s[len(s)-1] == 'Z' && s[19] == '.' {
		if _, fast := parseUTCTime(s); !fast && isTime(s) {
			t.Fatalf("parseTime(%q): the form Berth writes left to UnmarshalText", s)
		}
	}
	got, gotErr := parseTime(s)
	var want time.Time
	wantErr := want.UnmarshalText(s)
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("parseTime(%q) error %v, UnmarshalText's %v", s, gotErr, wantErr)
	}
	gotName, gotOff := got.Zone()
	wantName, wantOff := want.Zone()
	if _, fast := parseUTCTime(s); (fast && got != want) || !got.Equal(want) || gotName != wantName || gotOff != wantOff {
		t.Fatalf("parseTime(%q) = %#v, UnmarshalText's %#v", s, got, want)
	}
}

// isTime says whether UnmarshalText reads s.
func isTime(s []byte) bool {
	var t time.Time
	return t.UnmarshalText(s) == nil
}

// TestParseTimeMatchesUnmarshalText: the forms Berth writes, the edges
// of every field's range, leap days, and the near misses the fast path
// must leave to UnmarshalText (offsets, lower-case, ten fraction digits,
// a lone dot, signs and spaces in a field).
func TestParseTimeMatchesUnmarshalText(t *testing.T) {
	for _, s := range []string{
		"2026-11-27T02:13:42Z",
		"2026-11-27T02:13:42.1Z",
		"2026-11-27T02:13:42.123456789Z",
		"2026-11-27T02:13:42.000000000Z",
		"2026-11-27T02:13:42.1234567890Z",
		"2026-11-27T02:13:42.Z",
		"2026-11-27T02:13:42.12a4Z",
		"0000-01-01T00:00:00Z",
		"9999-12-31T23:59:59.999999999Z",
		"2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2000-02-29T00:00:00Z", "1900-02-29T00:00:00Z",
		"0000-02-29T00:00:00Z",
		"2026-04-31T00:00:00Z", "2026-04-30T00:00:00Z", "2026-01-32T00:00:00Z", "2026-01-00T00:00:00Z",
		"2026-00-10T00:00:00Z", "2026-13-10T00:00:00Z",
		"2026-11-27T24:00:00Z", "2026-11-27T23:60:00Z", "2026-11-27T23:59:60Z",
		"2026-11-27T02:13:42z", "2026-11-27t02:13:42Z", "2026-11-27 02:13:42Z",
		"2026-11-27T02:13:42+00:00", "2026-11-27T02:13:42-01:30", "2026-11-27T02:13:42.5+01:00",
		"2026-11-27T2:13:42Z", "+026-11-27T02:13:42Z", "2026-1-27T02:13:42Z", "2026-11-27T02:13:4 Z",
		"2026-11-27T02:13:42", "2026-11-27T02:13:42ZZ", "2026-11-27T02:13Z", "", "Z",
		"2026-11-27T02:13:42.123456789", "-0001-11-27T02:13:42Z",
		"2028-12-28T18:18:28.282828282Z", "2/26-11-27T02:13:42Z", "2026-11-27T02:13:4:Z",
	} {
		timeMatches(t, []byte(s))
	}
	// Random times over the whole range, as time.Time writes them.
	rng := rand.New(rand.NewSource(20))
	for range 20000 {
		tm := time.Unix(rng.Int63n(253402300800)-62135596800, rng.Int63n(1e9)).UTC()
		if rng.Intn(4) == 0 {
			tm = tm.Truncate(time.Second)
		}
		b, err := tm.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		timeMatches(t, b)
	}
}

// FuzzParseTime: for any bytes parseTime is UnmarshalText.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-11-27T02:13:42.123456789Z", "2024-02-29T23:59:59Z", "2026-11-27T02:13:42+01:00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) { timeMatches(t, s) })
}

// BenchmarkParseTime: the fast path against UnmarshalText on the form
// Berth writes.
func BenchmarkParseTime(b *testing.B) {
	s := []byte("2026-11-27T02:13:42.123456789Z")
	b.Run("parseTime", func(b *testing.B) {
		for b.Loop() {
			if _, err := parseTime(s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UnmarshalText", func(b *testing.B) {
		for b.Loop() {
			var t time.Time
			if err := t.UnmarshalText(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
