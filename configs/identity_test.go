package configs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A well-formed bcrypt hash (cost 4): the decoder checks the form only.
const testHash = "$2a$04$8t0CxP0RTnuSM2k2CkwmvuIqcELpbK9JVZHiY0F/UCAMyrhdz.gwO"

func TestParseIdentity(t *testing.T) {
	src := `
identity {
  token_ttl = "30m"
  user "alice" {
    password_hash = "` + testHash + `"
  }
  user "ops" {
    id = "u-0ps"
    password_hash = "` + testHash + `"
  }
  project "demo" {}
  project "p2" {
    id = "p-2"
  }
  assignment {
    user = "alice"
    project = "demo"
    role = "member"
  }
  assignment {
    user = "ops"
    system = "all"
    role = "admin"
  }
  endpoint "compute" {
    public = "http://c:8774/v2.1"
    internal = "http://10.0.0.1:8774/v2.1"
  }
}
`
	cfg, err := Parse([]byte(src), "t.hcl")
	if err != nil {
		t.Fatal(err)
	}
	id := cfg.Identity
	if id == nil || id.Bind != "127.0.0.1:5000" || id.TokenTTL != 30*time.Minute || id.Region != "RegionOne" {
		t.Fatalf("Identity = %+v", id)
	}
	if len(id.Users) != 2 || id.Users[0] != (IdentityUser{Name: "alice", PasswordHash: testHash}) || id.Users[1].ID != "u-0ps" {
		t.Errorf("Users = %+v", id.Users)
	}
	if len(id.Projects) != 2 || id.Projects[1] != (IdentityProject{Name: "p2", ID: "p-2"}) {
		t.Errorf("Projects = %+v", id.Projects)
	}
	want := []RoleAssignment{{User: "alice", Project: "demo", Role: "member"}, {User: "ops", System: true, Role: "admin"}}
	if len(id.Assignments) != 2 || id.Assignments[0] != want[0] || id.Assignments[1] != want[1] {
		t.Errorf("Assignments = %+v", id.Assignments)
	}
	if len(id.Endpoints) != 1 || id.Endpoints[0] != (CatalogEndpoint{Type: "compute", Public: "http://c:8774/v2.1",
		Internal: "http://10.0.0.1:8774/v2.1", Admin: "http://c:8774/v2.1"}) {
		t.Errorf("Endpoints = %+v", id.Endpoints)
	}
	if err := cfg.Require(RoleServer); err != nil {
		t.Errorf("an identity block alone is a server: %v", err)
	}
	if none, _ := Parse(nil, "t.hcl"); none.Identity != nil {
		t.Errorf("no block gave Identity %+v", none.Identity)
	}
}

func TestParseIdentityErrors(t *testing.T) {
	user := func(name string) string {
		return "  user \"" + name + "\" {\n    password_hash = \"" + testHash + "\"\n  }\n"
	}
	for _, tc := range []struct {
		desc string
		src  string
		want []diag
	}{
		{desc: "a password where its hash belongs",
			src:  "identity {\n  user \"a\" {\n    password_hash = \"hunter2\"\n  }\n}\n",
			want: []diag{{"3:21", "Invalid password_hash", "must be a bcrypt hash"}}},
		{desc: "no password_hash",
			src:  "identity {\n  user \"a\" {}\n}\n",
			want: []diag{{"2:3", "Missing password_hash", "berth identity hash-password"}}},
		{desc: "user defined twice",
			src:  "identity {\n" + user("a") + user("a") + "}\n",
			want: []diag{{"5:8", "Duplicate user", `user "a" is already defined at t.hcl:2,8-11`}}},
		{desc: "unknown role",
			src:  "identity {\n" + user("a") + "  project \"p\" {}\n  assignment {\n    user = \"a\"\n    project = \"p\"\n    role = \"owner\"\n  }\n}\n",
			want: []diag{{"9:12", "Unknown role", `got "owner"`}}},
		{desc: "a user assigned to an unknown project",
			src:  "identity {\n" + user("a") + "  assignment {\n    user = \"a\"\n    project = \"nope\"\n    role = \"member\"\n  }\n}\n",
			want: []diag{{"7:15", "Unknown project", `No project "nope"`}}},
		{desc: "an unknown user",
			src:  "identity {\n  project \"p\" {}\n  assignment {\n    user = \"bob\"\n    project = \"p\"\n    role = \"reader\"\n  }\n}\n",
			want: []diag{{"4:12", "Unknown user", `No user "bob"`}}},
		{desc: "project and system",
			src:  "identity {\n" + user("a") + "  project \"p\" {}\n  assignment {\n    user = \"a\"\n    project = \"p\"\n    system = \"all\"\n    role = \"admin\"\n  }\n}\n",
			want: []diag{{"9:14", "Both project and system", "one project or on the system"}}},
		{desc: "neither project nor system",
			src:  "identity {\n" + user("a") + "  assignment {\n    user = \"a\"\n    role = \"admin\"\n  }\n}\n",
			want: []diag{{"5:3", "Missing project", `system = "all"`}}},
		{desc: "system other than all",
			src:  "identity {\n" + user("a") + "  assignment {\n    user = \"a\"\n    system = \"some\"\n    role = \"admin\"\n  }\n}\n",
			want: []diag{{"7:14", "Invalid system", `got "some"`}}},
		{desc: "bad id and duplicate id",
			src:  "identity {\n  project \"p\" {\n    id = \"a/b\"\n  }\n  project \"q\" {\n    id = \"x\"\n  }\n  project \"r\" {\n    id = \"x\"\n  }\n}\n",
			want: []diag{{"3:10", "Invalid id", `got "a/b"`}, {"9:10", "Duplicate id", `id "x" is already used`}}},
		{desc: "unknown endpoint type, bad URL, no public",
			src:  "identity {\n  endpoint \"network\" {\n    public = \"http://n\"\n  }\n  endpoint \"compute\" {\n    public = \"c:8774\"\n  }\n  endpoint \"image\" {}\n}\n",
			want: []diag{{"2:12", "Unknown endpoint type", `"compute", "placement", "image", "identity"`}, {"6:14", "Invalid public", `got "c:8774"`}, {"8:3", "Missing public", "endpoint \"image\""}}},
		{desc: "short token_ttl, bad bind, empty region",
			src:  "identity {\n  token_ttl = \"10s\"\n  bind = \"5000\"\n  region = \" \"\n}\n",
			want: []diag{{"3:10", "Invalid bind", `got "5000"`}, {"2:15", "Invalid token_ttl", "at least 1m0s"}, {"4:12", "Empty region", "RegionOne"}}},
		{desc: "a control character in a name",
			src:  "identity {\n  project \"a\\tb\" {}\n}\n",
			want: []diag{{"2:11", "Invalid project name", "without control characters"}}},
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
