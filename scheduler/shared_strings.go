package scheduler

import (
	"sync"
	"unsafe"

	"github.com/berth-project/berth/etcdschema"
)

// Every scheduler keeps every instance's info (a million records at
// 100,000 hosts), and each record's host name and flavor were strings of
// their own, decoded from its value. The host manager holds each once:
// the host's name is its record's, and flavor names and ids come from a
// small table (a cloud has few flavors). The list decodes on several
// goroutines (informer.List), straight into these strings
// (etcdschema.DecodeInstanceInfoSharing): decoding new strings only to
// swap them for shared ones was three throwaway strings a record.

// maxInterned bounds the table: past it, new strings are kept as decoded.
const maxInterned = 4096

// internTable holds one copy of each string it was given (up to
// maxInterned). It is safe for concurrent use; the zero value is ready.
// Lookups take the read lock only: after the first records, every flavor
// is already there.
type internTable struct {
	mu sync.RWMutex
	m  map[string]string
}

// Share returns the table's string equal to b (etcdschema.StringSharer),
// adding a copy of b when the table has room.
func (t *internTable) Share(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	t.mu.RLock()
	held, ok := t.m[string(b)]
	t.mu.RUnlock()
	if ok {
		return held
	}
	return t.add(string(b))
}

// add returns the table's string equal to s, adding s itself when the
// table has room: the write-locked half of Share and ShareString, once
// a read lock found nothing.
func (t *internTable) add(s string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if held, ok := t.m[s]; ok {
		return held
	}
	if t.m == nil {
		t.m = make(map[string]string)
	}
	if len(t.m) < maxInterned {
		t.m[s] = s
	}
	return s
}

// ShareString returns the table's string equal to s, adding s itself (a
// string the caller owns, not a slice of a larger one) when the table
// has room.
func (t *internTable) ShareString(s string) string {
	if s == "" {
		return ""
	}
	t.mu.RLock()
	held, ok := t.m[s]
	t.mu.RUnlock()
	if ok {
		return held
	}
	return t.add(s)
}

// shareServiceStrings makes a freshly decoded service record (Decode's,
// not yet shared with anyone) hold the table's cell and agent version:
// every host's record repeats them, and each string is an object the
// collector marks for as long as the host is up (with the host's name,
// holdName, ~300,000 objects at 100,000 hosts). The provider uuid is
// the host's own.
func (hm *HostManager) shareServiceStrings(s *etcdschema.Service) {
	s.Cell = hm.names.ShareString(s.Cell)
	s.AgentVersion = hm.names.ShareString(s.AgentVersion)
}

// holdName makes *s the host record's name when they are equal: a
// decoded record's host is otherwise one more copy of the name (a
// service record's or capacity report's) or a substring of its key that
// keeps the whole key alive (an instance info's). It writes only when
// *s is a copy, so a record applied again (a test's reused event) is not
// written while request views read it.
func holdName(s *string, name string) {
	if *s == name && unsafe.StringData(*s) != unsafe.StringData(name) {
		*s = name
	}
}
