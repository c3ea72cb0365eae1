package configs

import (
	"errors"
	"strings"
	"testing"
)

// TestParseAuthModes: api and placement take auth = "keystone" with an
// identity block (which may serve nothing, bind = ""), and refuse it
// without one, at the auth attribute.
func TestParseAuthModes(t *testing.T) {
	identityOnlyChecks := "identity {\n  bind = \"\"\n  user \"a\" {\n    password_hash = \"" + testHash + "\"\n  }\n}\n"
	cfg, err := Parse([]byte("api {\n  auth = \"keystone\"\n}\nplacement {\n  auth = \"keystone\"\n}\n"+identityOnlyChecks), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.API.Auth != AuthKeystone || cfg.Placement.Auth != AuthKeystone || cfg.Identity.Bind != "" || cfg.Identity.PublicURL() != "" {
		t.Errorf("API %+v Placement %+v Identity %+v", cfg.API, cfg.Placement, cfg.Identity)
	}
	cfg, err = Parse([]byte("api {}\nidentity {\n  bind = \"0.0.0.0:5000\"\n}\n"), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.API.Auth != AuthNoAuth || cfg.Identity.PublicURL() != "http://127.0.0.1:5000/v3" {
		t.Errorf("default auth %q, identity URL %q", cfg.API.Auth, cfg.Identity.PublicURL())
	}

	for _, tc := range []struct {
		desc, src string
		want      []diag
	}{
		{desc: "keystone without an identity block",
			src:  "api {\n  auth = \"keystone\"\n}\nplacement {\n  auth = \"keystone\"\n}\n",
			want: []diag{{"2:10", "No identity block", `bind = ""`}, {"5:10", "No identity block", "add an identity block"}}},
		{desc: "an unknown mode",
			src:  "api {\n  auth = \"tokens\"\n}\n",
			want: []diag{{"2:10", "Invalid auth", `"noauth", "keystone"`}}},
		{desc: "token blocks in keystone mode",
			src:  "placement {\n  auth = \"keystone\"\n  token \"x\" {}\n}\n" + identityOnlyChecks,
			want: []diag{{"3:3", "Tokens without auth = \"tokens\"", `With auth = "keystone"`}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "t.hcl")
			var de *DiagnosticsError
			if !errors.As(err, &de) {
				t.Fatalf("Parse = %v, want diagnostics", err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				prefix := "t.hcl:" + w.at + ": " + w.summary + ": "
				if !strings.HasPrefix(lines[i], prefix) || !strings.Contains(lines[i], w.detail) {
					t.Errorf("diagnostic %d:\n got %s\nwant %s...%s", i, lines[i], prefix, w.detail)
				}
			}
		})
	}
}
