package gctune

import (
	"fmt"
	"strconv"
	"strings"
)

// sizeUnits are GOMEMLIMIT's suffixes (runtime/debug), longest first so
// that "MiB" is not read as "B".
var sizeUnits = []struct {
	suffix string
	bytes  int64
}{
	{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1},
}

// ParseSize reads a memory size as GOMEMLIMIT spells it: a whole number
// with one of B, KiB, MiB, GiB, TiB ("2GiB", "512MiB"), or "off" (0, no
// limit). A plain number without a unit is refused: bytes and megabytes
// are too easily confused in a config file.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "off" {
		return 0, nil
	}
	for _, u := range sizeUnits {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q is not a size like \"2GiB\" or \"512MiB\" (a whole number above 0 and a unit: B, KiB, MiB, GiB, TiB), or \"off\"", s)
		}
		if n > (1<<62)/u.bytes {
			return 0, fmt.Errorf("%q is too large", s)
		}
		return n * u.bytes, nil
	}
	return 0, fmt.Errorf("%q is not a size like \"2GiB\" or \"512MiB\" (a whole number above 0 and a unit: B, KiB, MiB, GiB, TiB), or \"off\"", s)
}

// FormatSize spells n bytes in the largest unit that divides it, as
// ParseSize reads it; 0 is "off".
func FormatSize(n int64) string {
	if n <= 0 {
		return "off"
	}
	for _, u := range sizeUnits {
		if n%u.bytes == 0 {
			return fmt.Sprintf("%d%s", n/u.bytes, u.suffix)
		}
	}
	return fmt.Sprintf("%dB", n)
}
