package configs

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// FuzzParse: for any bytes, Parse never panics, and a refused file's
// error is a *DiagnosticsError whose every diagnostic points into the
// file (file:line:col, one line each, as editors and grep read them). A
// config Parse accepts is checked against every role by Require, which
// may also refuse (a missing role block has no position: it names the
// file alone).
//
// Seeds are the example configs and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	examples, err := filepath.Glob("examples/*.hcl")
	if err != nil || len(examples) == 0 {
		f.Fatalf("example configs: %v %v", examples, err)
	}
	for _, path := range examples {
		src, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	const file = "fuzz.hcl"
	positioned := regexp.MustCompile(`^` + regexp.QuoteMeta(file) + `:[1-9][0-9]*:[1-9][0-9]*: `)
	named := regexp.MustCompile(`^` + regexp.QuoteMeta(file) + `(:[1-9][0-9]*:[1-9][0-9]*)?: `)
	f.Fuzz(func(t *testing.T, src []byte) {
		cfg, err := Parse(src, file)
		if err != nil {
			checkDiagnostics(t, src, err, positioned)
			return
		}
		if cfg == nil {
			t.Fatalf("%q: Parse returned neither a config nor an error", src)
		}
		for _, role := range []string{RoleServer, RoleConductor, RoleAgent, RoleDev, RoleEtcd} {
			if err := cfg.Require(role); err != nil {
				checkDiagnostics(t, src, err, named)
			}
		}
	})
}

// checkDiagnostics checks that err is a *DiagnosticsError with one line
// per diagnostic, each matching where.
func checkDiagnostics(t *testing.T, src []byte, err error, where *regexp.Regexp) {
	t.Helper()
	var de *DiagnosticsError
	if !errors.As(err, &de) {
		t.Fatalf("%q: error %T is not a *DiagnosticsError: %v", src, err, err)
	}
	if len(de.Diags) == 0 {
		t.Fatalf("%q: a DiagnosticsError with no diagnostics", src)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(de.Diags) {
		t.Fatalf("%q: %d diagnostics printed on %d lines:\n%s", src, len(de.Diags), len(lines), err)
	}
	for _, l := range lines {
		if !where.MatchString(l) {
			t.Fatalf("%q: diagnostic %q does not begin with %s", src, l, where)
		}
	}
}
