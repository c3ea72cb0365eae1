// Package etcdcluster reads an etcd member list ("name=http://host:2380,
// ..."; https when the members talk TLS), as an embedded member's
// initial_cluster gives it. The config
// decoder (which words its faults as HCL diagnostics) and the embedded
// member (for callers that skip the config) check it with the same rules.
package etcdcluster

import (
	"fmt"
	"net/url"
	"strings"
)

// MalformedError is an entry that is not name=SCHEME://host:port, where
// SCHEME is that of the member's own peer URL: every peer talks TLS
// (https) or none does (http).
type MalformedError struct{ Entry, Scheme string }

func (e *MalformedError) Error() string {
	return fmt.Sprintf("initial_cluster entry %q is not name=%s://host:port", e.Entry, e.Scheme)
}

// DuplicateError is a member named twice.
type DuplicateError struct{ Name string }

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("initial_cluster names member %q twice", e.Name)
}

// PeerMismatchError is this member listed with another peer URL than its
// own, which etcd would refuse only after starting, with a message about
// a mismatch deep in its logs.
type PeerMismatchError struct {
	Name        string
	Listed, Own string
}

func (e *PeerMismatchError) Error() string {
	return fmt.Sprintf("initial_cluster gives member %q the peer URL %s but its peer_url is %s", e.Name, e.Listed, e.Own)
}

// NotListedError is a list that does not name this member.
type NotListedError struct{ List, Name string }

func (e *NotListedError) Error() string {
	return fmt.Sprintf("initial_cluster %q does not name this member %q", e.List, e.Name)
}

// Check reads list and checks that it names the member called name with
// its own peer URL (peer). Its errors are one of the types above.
func Check(list, name, peer string) error {
	scheme := "http"
	if strings.HasPrefix(peer, "https://") {
		scheme = "https"
	}
	seen := map[string]bool{}
	own := false
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		n, u, ok := strings.Cut(entry, "=")
		pu, err := url.Parse(u)
		if !ok || n == "" || err != nil || pu.Scheme != scheme || pu.Hostname() == "" || pu.Port() == "" {
			return &MalformedError{Entry: entry, Scheme: scheme}
		}
		if seen[n] {
			return &DuplicateError{Name: n}
		}
		seen[n] = true
		if n == name {
			own = true
			if pu.String() != peer {
				return &PeerMismatchError{Name: n, Listed: u, Own: peer}
			}
		}
	}
	if !own {
		return &NotListedError{List: list, Name: name}
	}
	return nil
}
