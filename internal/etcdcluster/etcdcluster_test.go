package etcdcluster

import (
	"errors"
	"testing"
)

func TestCheck(t *testing.T) {
	const own = "http://10.0.0.12:2380"
	cases := []struct {
		name, list string
		want       any // nil, or a pointer to the error type expected
	}{
		{"three members", "a=http://10.0.0.11:2380, b=http://10.0.0.12:2380,c=http://10.0.0.13:2380", nil},
		{"alone", "b=http://10.0.0.12:2380", nil},
		{"no equals", "b http://10.0.0.12:2380", &MalformedError{}},
		{"no name", "=http://10.0.0.12:2380", &MalformedError{}},
		{"https", "b=https://10.0.0.12:2380", &MalformedError{}},
		{"no port", "b=http://10.0.0.12", &MalformedError{}},
		{"no host", "b=http://:2380", &MalformedError{}},
		{"empty entry", "b=http://10.0.0.12:2380,", &MalformedError{}},
		{"twice", "b=http://10.0.0.12:2380,b=http://10.0.0.13:2380", &DuplicateError{}},
		{"other peer url", "b=http://10.0.0.99:2380", &PeerMismatchError{}},
		{"not listed", "a=http://10.0.0.11:2380", &NotListedError{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
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
