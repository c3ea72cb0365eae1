package etcdcluster

import (
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	cases := []struct {
		name, list string
		want       any    // nil, or a pointer to the error type expected
		own        string // this member's peer URL; "" is http://10.0.0.12:2380
	}{
		{"three members", "a=http://10.0.0.11:2380, b=http://10.0.0.12:2380,c=http://10.0.0.13:2380", nil, ""},
		{"alone", "b=http://10.0.0.12:2380", nil, ""},
		{"no equals", "b http://10.0.0.12:2380", &MalformedError{}, ""},
		{"no name", "=http://10.0.0.12:2380", &MalformedError{}, ""},
		{"https among http peers", "b=https://10.0.0.12:2380", &MalformedError{}, ""},
		{"https peers", "a=https://10.0.0.11:2380,b=https://10.0.0.12:2380", nil, "https://10.0.0.12:2380"},
		{"http among https peers", "a=http://10.0.0.11:2380,b=https://10.0.0.12:2380", &MalformedError{}, "https://10.0.0.12:2380"},
		{"no port", "b=http://10.0.0.12", &MalformedError{}, ""},
		{"no host", "b=http://:2380", &MalformedError{}, ""},
		{"empty entry", "b=http://10.0.0.12:2380,", &MalformedError{}, ""},
		{"twice", "b=http://10.0.0.12:2380,b=http://10.0.0.13:2380", &DuplicateError{}, ""},
		{"other peer url", "b=http://10.0.0.99:2380", &PeerMismatchError{}, ""},
		{"not listed", "a=http://10.0.0.11:2380", &NotListedError{}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			own := c.own
			if own == "" {
				own = "http://10.0.0.12:2380"
			}
			err := Check(c.list, "b", own)
			switch want := c.want.(type) {
			case nil:
				if err != nil {
					t.Fatalf("Check(%q): %v", c.list, err)
				}
			case *MalformedError:
				if !errors.As(err, &want) {
					t.Fatalf("Check(%q) = %v, want a malformed entry", c.list, err)
				}
			case *DuplicateError:
				if !errors.As(err, &want) || want.Name != "b" {
					t.Fatalf("Check(%q) = %v, want b listed twice", c.list, err)
				}
			case *PeerMismatchError:
				if !errors.As(err, &want) || want.Own != own {
					t.Fatalf("Check(%q) = %v, want a peer URL mismatch", c.list, err)
				}
			case *NotListedError:
				if !errors.As(err, &want) || want.Name != "b" {
					t.Fatalf("Check(%q) = %v, want b not listed", c.list, err)
				}
			}
		})
	}
}
