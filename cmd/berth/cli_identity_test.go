package main

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestIdentityHashPassword(t *testing.T) {
	for _, tc := range []struct {
		desc, stdin string
		want        int
	}{
		{desc: "a line", stdin: "s3cret pass\n", want: 0},
		{desc: "no newline", stdin: "s3cret pass", want: 0},
		{desc: "empty", stdin: "\n", want: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := cmdIdentity([]string{"hash-password"}, strings.NewReader(tc.stdin), &out, &errb)
			if code != tc.want {
				t.Fatalf("exit %d, want %d: %s", code, tc.want, errb.String())
			}
			if code == 0 {
				if err := bcrypt.CompareHashAndPassword([]byte(strings.TrimSpace(out.String())), []byte("s3cret pass")); err != nil {
					t.Errorf("printed %q, not the password's hash: %v", out.String(), err)
				}
			}
		})
	}
	if code := cmdIdentity([]string{"hash"}, strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
		t.Errorf("unknown verb: exit %d, want 2", code)
	}
}
