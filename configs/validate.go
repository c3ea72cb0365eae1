package configs

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/hashicorp/hcl/v2"
)

// ValidateFiles parses and checks each file (every value and cross-field
// rule; with a role, also what that role requires and the files its tls
// blocks name, as `berth ROLE -config` would at start) for `berth config
// validate`. It prints "FILE: ok" or one diagnostic per line to w, and
// reports whether every file was fine. Every file is checked even after a
// bad one.
func ValidateFiles(paths []string, role string, w io.Writer) bool {
	ok := true
	for _, p := range paths {
		cfg, err := Load(p)
		if err == nil && role != "" {
			err = cfg.Require(role)
		}
		if err == nil && role != "" {
			err = cfg.CheckFiles() // the machine that runs the role has them
		}
		if err != nil {
			ok = false
			var de *DiagnosticsError
			if errors.As(err, &de) {
				fmt.Fprintln(w, de.Error())
			} else {
				fmt.Fprintf(w, "%s: %v\n", p, err)
			}
			continue
		}
		fmt.Fprintf(w, "%s: ok\n", p)
	}
	return ok
}

// CheckFilters reports enabled filters that are not in known (the
// scheduler's registry, which this package cannot import), pointing at
// enabled_filters in the file. The scheduler calls it at start-up.
func (s *Scheduler) CheckFilters(known []string) error {
	var diags hcl.Diagnostics
	for _, f := range s.EnabledFilters {
		if !slices.Contains(known, f) {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Unknown filter",
				Detail:   fmt.Sprintf("%q is not a scheduler filter; known filters are %s.", f, quoteList(known)),
				Subject:  s.enabledFiltersRange,
			})
		}
	}
	return diagsError(s.filename, diags)
}
