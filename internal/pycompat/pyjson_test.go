package pycompat

import "testing"

// The expected texts are what Python 3.11's json.loads (and the UTF-8
// decode before it) says for each body, recorded from the interpreter
// Placement 8.0 runs on.
func TestPyJSONErrorMatchesPython(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"", "Expecting value: line 1 column 1 (char 0)"},
		{" ", "Expecting value: line 1 column 2 (char 1)"},
		{"{", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"},
		{"{\"a\"", "Expecting ':' delimiter: line 1 column 5 (char 4)"},
		{"{\"a\":", "Expecting value: line 1 column 6 (char 5)"},
		{"{\"a\":1", "Expecting ',' delimiter: line 1 column 7 (char 6)"},
		{"{\"a\":1,", "Expecting property name enclosed in double quotes: line 1 column 8 (char 7)"},
		{"{\"a\":1,}", "Expecting property name enclosed in double quotes: line 1 column 8 (char 7)"},
		{"{\"a\" 1}", "Expecting ':' delimiter: line 1 column 6 (char 5)"},
		{"{a:1}", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"},
		{"[", "Expecting value: line 1 column 2 (char 1)"},
		{"[1", "Expecting ',' delimiter: line 1 column 3 (char 2)"},
		{"[1,", "Expecting value: line 1 column 4 (char 3)"},
		{"[1,]", "Expecting value: line 1 column 4 (char 3)"},
		{"[1 2]", "Expecting ',' delimiter: line 1 column 4 (char 3)"},
		{"tru", "Expecting value: line 1 column 1 (char 0)"},
		{"nul", "Expecting value: line 1 column 1 (char 0)"},
		{"01", "Extra data: line 1 column 2 (char 1)"},
		{"1.", "Extra data: line 1 column 2 (char 1)"},
		{"-", "Expecting value: line 1 column 1 (char 0)"},
		{"-x", "Expecting value: line 1 column 1 (char 0)"},
		{"\"abc", "Unterminated string starting at: line 1 column 1 (char 0)"},
		{"\"a\\qb\"", "Invalid \\escape: line 1 column 3 (char 2)"},
		{"\"a\\u12\"", "Invalid \\uXXXX escape: line 1 column 4 (char 3)"},
		{"\"a\\u12G4\"", "Invalid \\uXXXX escape: line 1 column 4 (char 3)"},
		{"\"a\tb\"", "Invalid control character at: line 1 column 3 (char 2)"},
		{"{\"a\":1}x", "Extra data: line 1 column 8 (char 7)"},
		{"{\"a\":1} {}", "Extra data: line 1 column 9 (char 8)"},
		{"\n\n  {\"a\": [1, 2,\n x]}", "Expecting value: line 4 column 2 (char 18)"},
		{"\ufeff{}", "Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)"},
		{"NaN", ""},
		{"[Infinity, -Infinity]", ""},
		{"1e", "Extra data: line 1 column 2 (char 1)"},
		{"1e+", "Extra data: line 1 column 2 (char 1)"},
		{"1.5e3", ""},
		{"{\"a\":\"\\ud800\\u12\"}", "Invalid \\uXXXX escape: line 1 column 14 (char 13)"},
		{"\"\\ud83d\\ude00\"", ""},
		{"{\"\u00e9\": x}", "Expecting value: line 1 column 7 (char 6)"},
		{"\"abc\\", "Unterminated string starting at: line 1 column 1 (char 0)"},
		{"{\"a\":1 \"b\":2}", "Expecting ',' delimiter: line 1 column 8 (char 7)"},
		{"[1]]", "Extra data: line 1 column 4 (char 3)"},
		{"{\"a\":}", "Expecting value: line 1 column 6 (char 5)"},
		{"{,}", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"},
		{"[,1]", "Expecting value: line 1 column 2 (char 1)"},
		{"\"\\\"", "Unterminated string starting at: line 1 column 1 (char 0)"},
	} {
		if got := JSONError([]byte(tc.body)); got != tc.want {
			t.Errorf("JSONError(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
	for _, tc := range []struct {
		body []byte
		want string
	}{
		{[]byte{255}, "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"},
		{[]byte{123, 34, 97, 34, 58, 32, 34, 195, 34, 125}, "'utf-8' codec can't decode byte 0xc3 in position 7: invalid continuation byte"},
		{[]byte{123, 34, 97, 34, 58, 32, 34, 195, 40, 120, 34, 125}, "'utf-8' codec can't decode byte 0xc3 in position 7: invalid continuation byte"},
		{[]byte{226, 130}, "'utf-8' codec can't decode bytes in position 0-1: unexpected end of data"},
	} {
		if got := JSONError(tc.body); got != tc.want {
			t.Errorf("JSONError(%q) = %q, want %q", tc.body, got, tc.want)
		}
	}
}
