package placement

import (
	"math/bits"
	"strconv"
)

func trailingZeros(w uint64) int { return bits.TrailingZeros64(w) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
