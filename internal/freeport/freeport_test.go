package freeport

import (
	"fmt"
	"net"
	"testing"
)

// TestPortIsBelowTheEphemeralRange: every port drawn can be bound and is
// outside the range outgoing connections take their source ports from.
func TestPortIsBelowTheEphemeralRange(t *testing.T) {
	high := ephemeralStart()
	ports, err := Ports(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < low || p >= high {
			t.Errorf("port %d outside [%d, %d)", p, low, high)
		}
		if seen[p] {
			t.Errorf("port %d given twice", p)
		}
		seen[p] = true
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0]))
	if err != nil {
		t.Fatalf("bind the port given: %v", err)
	}
	l.Close()
}
