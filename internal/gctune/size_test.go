package gctune

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		desc, in string
		want     int64
		err      string
	}{
		{desc: "GiB", in: "2GiB", want: 2 << 30},
		{desc: "MiB with spaces", in: " 512 MiB ", want: 512 << 20},
		{desc: "KiB", in: "64KiB", want: 64 << 10},
		{desc: "bytes", in: "1000B", want: 1000},
		{desc: "TiB", in: "1TiB", want: 1 << 40},
		{desc: "off", in: "off", want: 0},
		{desc: "no unit is refused", in: "2048", err: "not a size"},
		{desc: "decimal units are not GOMEMLIMIT's", in: "2GB", err: "not a size"},
		{desc: "fractions are refused", in: "1.5GiB", err: "not a size"},
		{desc: "zero is refused (off says it)", in: "0GiB", err: "not a size"},
		{desc: "negative", in: "-1GiB", err: "not a size"},
		{desc: "overflow", in: "99999999999TiB", err: "too large"},
		{desc: "empty", in: "", err: "not a size"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseSize(%q) = %d, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
			if back, err := ParseSize(FormatSize(got)); err != nil || back != got {
				t.Fatalf("ParseSize(FormatSize(%d)=%q) = %d, %v", got, FormatSize(got), back, err)
			}
		})
	}
}
