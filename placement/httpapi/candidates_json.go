package httpapi

import (
	"encoding/json"
	"strconv"
	"sync"

	"github.com/berth-project/berth/placement"
)

// GET /allocation_candidates' answer is the API's largest: 1,000
// allocation requests and their providers' summaries are about 400 KB, and
// building that as nested maps for encoding/json (which then sorts every
// map's keys by reflection) cost ten times the search. candidatesJSON
// writes the same bytes straight into one pooled buffer from the answer
// in written order (placement.OrderedCandidates: no map to build, walk
// or sort): keys in the order encoding/json sorts them to, strings
// escaped as it escapes them (appendJSONString), a resources list shared
// by the next request copied from the bytes already written, and each
// provider summary's bytes kept with the summary
// (placement.ProviderSummary.Memo), so they are written once per
// provider record, not once per request. TestCandidatesJSONMatchesReference
// and ...OverHTTP compare it with the map-building encoding it replaced
// at every microversion.

// candidatesJSON writes one answer at one microversion.
type candidatesJSON struct {
	mv int
	// requested is the classes the query asks for; before 1.27 a
	// summary lists only those.
	requested map[string]bool
	buf       []byte
	// lastRes is the resources list last written and lastResAt where
	// its bytes are in buf: the answer shares one list among the requests
	// asking the same amounts of one provider, so the next one copies them.
	lastRes              []placement.ClassAmount
	lastResAt, lastResTo int
}

// candidateBufs recycles the answers' buffers (a few hundred KB each).
var candidateBufs = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

// maxPooledBuf is the largest buffer put back: a rare huge answer
// (limit unset over 100,000 providers) is left to the collector rather
// than kept forever.
const maxPooledBuf = 8 << 20

func (e *candidatesJSON) atLeast(minor int) bool { return e.mv >= minor }

// encode appends cands' JSON to e.buf.
func (e *candidatesJSON) encode(cands *placement.OrderedCandidates) {
	e.buf = append(e.buf, `{"allocation_requests":[`...)
	for i := range cands.Requests {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.allocationRequest(&cands.Requests[i])
	}
	e.buf = append(e.buf, `],"provider_summaries":{`...)
	for i, s := range cands.Summaries {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendJSONString(e.buf, s.UUID)
		e.buf = append(e.buf, ':')
		e.summary(s.Summary)
	}
	e.buf = append(e.buf, "}}"...)
}

// allocationRequest writes one allocation request: before 1.12 its
// allocations as a list by provider, from 1.12 an object keyed by
// provider, with the mappings from 1.34.
func (e *candidatesJSON) allocationRequest(ar *placement.OrderedRequest) {
	if !e.atLeast(12) {
		e.buf = append(e.buf, `{"allocations":`...)
		if len(ar.Allocations) == 0 {
			e.buf = append(e.buf, "null}"...)
			return
		}
		e.buf = append(e.buf, '[')
		for i := range ar.Allocations {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(e.buf, `{"resource_provider":{"uuid":`...)
			e.buf = appendJSONString(e.buf, ar.Allocations[i].Provider)
			e.buf = append(e.buf, `},"resources":`...)
			e.resources(ar.Allocations[i].Resources)
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, "]}"...)
		return
	}
	e.buf = append(e.buf, `{"allocations":`...)
	if ar.Allocations == nil {
		e.buf = append(e.buf, "null"...)
	} else {
		e.buf = append(e.buf, '{')
		for i := range ar.Allocations {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.buf = appendJSONString(e.buf, ar.Allocations[i].Provider)
			e.buf = append(e.buf, `:{"resources":`...)
			e.resources(ar.Allocations[i].Resources)
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, '}')
	}
	if e.atLeast(34) {
		e.buf = append(e.buf, `,"mappings":`...)
		e.mappings(ar.Mappings)
	}
	e.buf = append(e.buf, '}')
}

// resources writes a class-to-amount object, copying the previous one's
// bytes when res is the same list (requests asking the same amounts
// share one).
func (e *candidatesJSON) resources(res []placement.ClassAmount) {
	if res == nil {
		e.buf = append(e.buf, "null"...)
		return
	}
	if len(res) > 0 && len(res) == len(e.lastRes) && &res[0] == &e.lastRes[0] {
		e.buf = append(e.buf, e.buf[e.lastResAt:e.lastResTo]...)
		return
	}
	at := len(e.buf)
	e.buf = append(e.buf, '{')
	for i, ca := range res {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendJSONString(e.buf, ca.Class)
		e.buf = append(e.buf, ':')
		e.buf = strconv.AppendInt(e.buf, ca.Amount, 10)
	}
	e.buf = append(e.buf, '}')
	e.lastRes, e.lastResAt, e.lastResTo = res, at, len(e.buf)
}

// mappings writes the request groups' providers (1.34).
func (e *candidatesJSON) mappings(m []placement.GroupProviders) {
	if m == nil {
		e.buf = append(e.buf, "null"...)
		return
	}
	e.buf = append(e.buf, '{')
	for i, g := range m {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.buf = appendJSONString(e.buf, g.Suffix)
		e.buf = append(e.buf, ':')
		e.buf = appendStringList(e.buf, g.Providers)
	}
	e.buf = append(e.buf, '}')
}

// summary writes one provider summary in the microversion's shape. From
// 1.27 the shape depends on the microversion alone (before, on the
// classes requested too), so the bytes are the summary's memo.
func (e *candidatesJSON) summary(ps *placement.ProviderSummary) {
	if !e.atLeast(27) {
		e.buf = e.appendSummary(e.buf, ps)
		return
	}
	slot := 0
	if e.atLeast(29) {
		slot = 1
	}
	e.buf = append(e.buf, ps.Memo(slot, func() []byte { return e.appendSummary(nil, ps) })...)
}

// appendSummary appends ps's JSON at e's microversion to dst.
func (e *candidatesJSON) appendSummary(dst []byte, ps *placement.ProviderSummary) []byte {
	if e.atLeast(29) {
		dst = append(dst, `{"parent_provider_uuid":`...)
		if ps.ParentProviderUUID == "" {
			dst = append(dst, "null"...)
		} else {
			dst = appendJSONString(dst, ps.ParentProviderUUID)
		}
		dst = append(dst, `,"resources":`...)
	} else {
		dst = append(dst, `{"resources":`...)
	}
	var keys [8]string
	dst = append(dst, '{')
	n := 0
	for _, rc := range sortedMapKeys(keys[:0], ps.Resources) {
		if !e.atLeast(27) && !e.requested[rc] {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		r := ps.Resources[rc]
		dst = appendJSONString(dst, rc)
		dst = append(dst, `:{"capacity":`...)
		dst = strconv.AppendInt(dst, r.Capacity, 10)
		dst = append(dst, `,"used":`...)
		dst = strconv.AppendInt(dst, r.Used, 10)
		dst = append(dst, '}')
	}
	dst = append(dst, '}')
	if e.atLeast(29) {
		dst = append(dst, `,"root_provider_uuid":`...)
		dst = appendJSONString(dst, ps.RootProviderUUID)
	}
	if e.atLeast(17) {
		dst = append(dst, `,"traits":`...)
		dst = appendStringList(dst, traitOrder(ps.Traits))
	}
	dst = append(dst, '}')
	return dst
}

// appendStringList writes a list of strings (nil is null, as
// encoding/json writes it).
func appendStringList(dst []byte, l []string) []byte {
	if l == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, s := range l {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, s)
	}
	return append(dst, ']')
}

// sortedMapKeys appends m's keys to dst in order. The maps written here
// hold a handful of keys (classes, providers of one request, groups), so
// an insertion sort on the caller's stack array beats sort.Strings.
func sortedMapKeys[V any](dst []string, m map[string]V) []string {
	for k := range m {
		dst = append(dst, k)
	}
	for i := 1; i < len(dst); i++ {
		for j := i; j > 0 && dst[j] < dst[j-1]; j-- {
			dst[j], dst[j-1] = dst[j-1], dst[j]
		}
	}
	return dst
}

// jsonPlain[c] says that ASCII byte c stands for itself inside a JSON
// string as encoding/json writes it (which escapes the control bytes, the
// quote, the backslash and, for HTML, <, > and &).
var jsonPlain = func() (t [128]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = true
	}
	t['"'], t['\\'], t['<'], t['>'], t['&'] = false, false, false, false, false
	return t
}()

// appendJSONString appends s as encoding/json writes a string: uuids,
// class and trait names are plain ASCII and copied as they are; anything
// else goes through encoding/json itself, so the bytes are its bytes.
func appendJSONString(dst []byte, s string) []byte {
	if !jsonPlainString(s) {
		b, _ := json.Marshal(s) // a string always marshals
		return append(dst, b...)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// jsonPlainString says every byte of s stands for itself in JSON
// (jsonPlain). An answer at limit 1000 writes some 3,000 uuids, and
// checking them a byte at a time was a third of its encoding, so eight
// bytes are checked at once: a word has a byte that is not plain when one
// has its top bit set, is below 0x20, or equals one of the five escaped
// characters (the "has a zero byte" test on the word xor the character
// repeated). These tests say whether some byte matches, never which,
// which is all that is needed.
func jsonPlainString(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if w&highs != 0 || (w-0x20*ones)&^w&highs != 0 ||
			hasZeroByte(w^('"'*ones)) || hasZeroByte(w^('\\'*ones)) ||
			hasZeroByte(w^('<'*ones)) || hasZeroByte(w^('>'*ones)) || hasZeroByte(w^('&'*ones)) {
			return false
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || !jsonPlain[c] {
			return false
		}
	}
	return true
}

// hasZeroByte says whether some byte of w is zero.
func hasZeroByte(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return (w-ones)&^w&highs != 0
}
