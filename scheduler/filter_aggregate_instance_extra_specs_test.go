package scheduler

import "testing"

func TestAggregateInstanceExtraSpecsFilter(t *testing.T) {
	ssd := agg("a", "ssd", "true", "cpu_gen", "5", "arch", "x86_64 aarch64")
	slow := agg("b", "ssd", "false")
	checkFilter(t, AggregateInstanceExtraSpecsFilter{}, []filterCase{
		{"no extra specs passes", inAggs("h"), flavorCycle("1", "f"), passes},
		{"unscoped key matches by equality", inAggs("h", ssd), flavorCycle("1", "f", "ssd", "true"), passes},
		{"unscoped key mismatch fails", inAggs("h", slow), flavorCycle("1", "f", "ssd", "true"), "aggregate metadata ssd=\"false\" does not match extra spec ssd=\"true\""},
		{"scoped key matches", inAggs("h", ssd), flavorCycle("1", "f", "aggregate_instance_extra_specs:ssd", "true"), passes},
		{"missing key fails", inAggs("h"), flavorCycle("1", "f", "ssd", "true"), "no aggregate metadata ssd for extra spec ssd=\"true\""},
		{"other scopes are skipped", inAggs("h"), flavorCycle("1", "f", "hw:cpu_policy", "dedicated", "resources:VCPU", "2", "trait:X", "required"), passes},
		{"one of several aggregates' values suffices", inAggs("h", slow, ssd), flavorCycle("1", "f", "ssd", "true"), passes},
		{"operator applies", inAggs("h", ssd), flavorCycle("1", "f", "cpu_gen", ">= 4"), passes},
		{"operator fails", inAggs("h", ssd), flavorCycle("1", "f", "cpu_gen", ">= 6"), "aggregate metadata cpu_gen=\"5\" does not match extra spec cpu_gen=\">= 6\""},
		{"every spec must match", inAggs("h", ssd), flavorCycle("1", "f", "ssd", "true", "cpu_gen", "== 4"), "aggregate metadata cpu_gen=\"5\" does not match extra spec cpu_gen=\"== 4\""},
	})
}

func TestExtraSpecMatch(t *testing.T) {
	cases := []struct {
		value, req string
		want       bool
	}{
		{"1", "1", true},
		{"1", "2", false},
		{"true", "true", true},
		{"123", "= 123", true},
		{"124", "= 123", true}, // "=" means at least
		{"122", "= 123", false},
		{"123", "== 123.0", true},
		{"123", "== 124", false},
		{"123", "!= 124", true},
		{"123", "!= 123", false},
		{"5", ">= 5", true},
		{"4", ">= 5", false},
		{"5", "<= 5", true},
		{"6", "<= 5", false},
		{"abc", "= 5", false}, // not a number: no match
		{"abc", "s== abc", true},
		{"abc", "s== abd", false},
		{"abc", "s!= abd", true},
		{"abc", "s!= abc", false},
		{"abc", "s< abd", true},
		{"abd", "s< abc", false},
		{"abc", "s<= abc", true},
		{"abd", "s> abc", true},
		{"abc", "s> abc", false},
		{"abc", "s>= abc", true},
		{"ab", "s>= abc", false},
		{"x86_64 aarch64", "<in> aarch64", true},
		{"x86_64", "<in> aarch64", false},
		{"avx avx2 sse", "<all-in> avx sse", true},
		{"avx sse", "<all-in> avx avx512", false},
		{"b", "<or> a <or> b <or> c", true},
		{"d", "<or> a <or> b <or> c", false},
		{"a", "<or> a", true},
		{"5", ">=", false}, // operator without operand
		{"x", "<unknown> x", false},
		{"<unknown> x", "<unknown> x", true}, // no operator: plain equality
	}
	for _, c := range cases {
		if got := extraSpecMatch(c.value, c.req); got != c.want {
			t.Errorf("extraSpecMatch(%q, %q) = %v, want %v", c.value, c.req, got, c.want)
		}
	}
}
