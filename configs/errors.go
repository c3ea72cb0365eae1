package configs

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// DiagnosticsError carries every problem found in one config file, so an
// operator fixes them all in one pass rather than one per restart.
type DiagnosticsError struct {
	// Filename names the file for diagnostics that have no source range
	// (e.g. a role block that is missing altogether).
	Filename string
	Diags    hcl.Diagnostics
}

// Error prints one line per diagnostic, "file:line:col: summary: detail",
// the form editors and grep understand.
func (e *DiagnosticsError) Error() string {
	lines := make([]string, 0, len(e.Diags))
	for _, d := range e.Diags {
		lines = append(lines, e.line(d))
	}
	return strings.Join(lines, "\n")
}

func (e *DiagnosticsError) line(d *hcl.Diagnostic) string {
	var where string
	switch {
	case d.Subject != nil:
		where = fmt.Sprintf("%s:%d:%d", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
	case e.Filename != "":
		where = e.Filename
	default:
		where = "config"
	}
	msg := where + ": "
	if d.Severity == hcl.DiagWarning {
		msg += "warning: "
	}
	msg += d.Summary
	if d.Detail != "" {
		// HCL details may wrap; one diagnostic must stay one line.
		msg += ": " + strings.Join(strings.Fields(d.Detail), " ")
	}
	return msg
}

// diagsError returns nil when diags hold no error, so callers can return
// it directly.
func diagsError(filename string, diags hcl.Diagnostics) error {
	if !diags.HasErrors() {
		return nil
	}
	return &DiagnosticsError{Filename: filename, Diags: diags}
}
