package main

import (
	"fmt"
	"sort"
	"strings"
)

// hintFlag collects repeated --hint KEY=VALUE into Nova's scheduler hints:
// group takes one value, same_host and different_host accumulate.
type hintFlag map[string]any

func (h hintFlag) Type() string { return "KEY=VALUE" }

func (h hintFlag) String() string {
	if len(h) == 0 {
		return ""
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, h[k]))
	}
	return strings.Join(parts, ",")
}

func (h hintFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || val == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	switch k {
	case "group":
		h[k] = val
	case "same_host", "different_host":
		list, _ := h[k].([]string)
		h[k] = append(list, val)
	default:
		return fmt.Errorf("unknown hint %q (known: group, same_host, different_host)", k)
	}
	return nil
}
