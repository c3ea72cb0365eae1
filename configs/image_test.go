package configs

import "testing"

func TestParseImage(t *testing.T) {
	for _, tc := range []struct {
		desc, src  string
		bind, auth string
	}{
		{"defaults, with an identity block", "identity {}\nimage {}\n", "127.0.0.1:9292", AuthKeystone},
		{"noauth needs no identity", "image {\n  bind = \"0.0.0.0:9393\"\n  auth = \"noauth\"\n}\n", "0.0.0.0:9393", AuthNoAuth},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c, err := Parse([]byte(tc.src), "t.hcl")
			if err != nil {
				t.Fatal(err)
			}
			if c.Image == nil || c.Image.Bind != tc.bind || c.Image.Auth != tc.auth {
				t.Errorf("Image = %+v", c.Image)
			}
			if err := c.Require(RoleServer); err != nil {
				t.Errorf("an image block alone is not a server: %v", err)
			}
		})
	}
	if c, err := Parse([]byte("api {}\n"), "t.hcl"); err != nil || c.Image != nil {
		t.Errorf("a file without an image block serves one: %+v, %v", c, err)
	}
	checkRefused(t, []refused{
		{desc: "identity auth without an identity block, at the block",
			src:  "image {\n  bind = \"127.0.0.1:9292\"\n}\n",
			want: diag{"1:1", "Image API tokens need an identity block", `set auth = "noauth"`}},
		{desc: "identity auth without an identity block, at the attribute",
			src:  "image {\n  auth = \"keystone\"\n}\n",
			want: diag{"2:10", "Image API tokens need an identity block", "identity { ... } block"}},
		{desc: "an unknown auth",
			src:  "identity {}\nimage {\n  auth = \"tokens\"\n}\n",
			want: diag{"3:10", "Invalid auth", `"tokens"`}},
		{desc: "a bad bind",
			src:  "identity {}\nimage {\n  bind = \"9292\"\n}\n",
			want: diag{"3:10", "Invalid bind", `got "9292"`}},
	})
}
