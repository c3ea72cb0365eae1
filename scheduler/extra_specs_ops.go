package scheduler

import (
	"strconv"
	"strings"
)

// extraSpecOps are Nova's extra_specs_ops: value is the host's (aggregate
// metadata), req the flavor's, after the operator word.
var extraSpecOps = map[string]func(value string, words []string) bool{
	"=":        numeric(func(v, r float64) bool { return v >= r }), // at least
	"==":       numeric(func(v, r float64) bool { return v == r }),
	"!=":       numeric(func(v, r float64) bool { return v != r }),
	">=":       numeric(func(v, r float64) bool { return v >= r }),
	"<=":       numeric(func(v, r float64) bool { return v <= r }),
	"s==":      str(func(v, r string) bool { return v == r }),
	"s!=":      str(func(v, r string) bool { return v != r }),
	"s<":       str(func(v, r string) bool { return v < r }),
	"s<=":      str(func(v, r string) bool { return v <= r }),
	"s>":       str(func(v, r string) bool { return v > r }),
	"s>=":      str(func(v, r string) bool { return v >= r }),
	"<in>":     str(func(v, r string) bool { return strings.Contains(v, r) }),
	"<all-in>": allIn,
}

// extraSpecMatch is Nova's extra_specs_ops.match(value, req). req is split
// into words; a first word that is an operator applies it to the next
// word (every following word for <all-in>; "<or> a <or> b" matches any of
// a, b exactly). Without an operator the match is plain string equality
// of the whole req. A numeric operator on a non-number does not match
// (Nova raises ValueError there, failing the request).
func extraSpecMatch(value, req string) bool {
	words := strings.Fields(req)
	if len(words) == 0 {
		return value == req
	}
	op := words[0]
	if op == "<or>" {
		for i := 1; i < len(words); i += 2 {
			if words[i] == value {
				return true
			}
		}
		return false
	}
	fn, ok := extraSpecOps[op]
	if !ok {
		return value == req
	}
	if len(words) < 2 {
		return false
	}
	return fn(value, words[1:])
}

func numeric(cmp func(v, r float64) bool) func(string, []string) bool {
	return func(value string, words []string) bool {
		v, err1 := strconv.ParseFloat(strings.TrimSpace(value), 64)
		r, err2 := strconv.ParseFloat(words[0], 64)
		return err1 == nil && err2 == nil && cmp(v, r)
	}
}

func str(cmp func(v, r string) bool) func(string, []string) bool {
	return func(value string, words []string) bool { return cmp(value, words[0]) }
}

// allIn: every word occurs in value (Nova's "all(val in x for val in y)",
// a substring test on a string value).
func allIn(value string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(value, w) {
			return false
		}
	}
	return true
}
