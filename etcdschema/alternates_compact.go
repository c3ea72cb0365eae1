package etcdschema

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The Alternates record rides in every build cast, and its selections were
// about half of the cast's bytes (~890 of 1,877 at 1,000 hosts): each
// alternate repeated what the record already says (its cell, its node
// named as its host, the allocation request's version) and carried its
// allocation request as an escaped JSON string that spells the compute
// node's uuid a second time. Every byte put is proposed, logged, applied
// and delivered to watchers by etcd (~10 B allocated per byte), so
// version 2 of the record writes each selection compactly and a reader
// expands it back into the same Selection:
//
//   - nodename is written only when it differs from service_host, and
//     cell_uuid only when it differs from the record's cell (absent means
//     equal; a differing empty value is written as "");
//   - allocation_request_version and availability_zone are each written
//     once on the record when every selection has the same one, and then
//     on a selection only when it differs;
//   - an allocation request of the single-provider form
//     {"allocations":{"<compute_node_uuid>":{"resources":R}}} (the
//     scheduler's for a compute node with no nested or sharing providers)
//     is written as "resources":R, R the same bytes; any other form is
//     written as before.
//
// Version 1 records (older casts and retries in flight during an
// upgrade, an older Berth's alternates key) decode as before: they write
// every member. An older Berth refuses a version 2 record by its version
// (Decode's ErrUnsupportedVersion naming the key): its cell conductor
// leaves such a retry for a newer conductor, its selection API answers an
// error; neither misreads it.

// wireAlternates is an Alternates record as stored (either version).
type wireAlternates struct {
	Version      int    `json:"version"`
	InstanceUUID string `json:"instance_uuid"`
	Cell         string `json:"cell"`
	MaxAttempts  int    `json:"max_attempts"`
	// AllocationRequestVersion and AvailabilityZone are every
	// selection's, when they share them (version 2).
	AllocationRequestVersion string          `json:"allocation_request_version,omitempty"`
	AvailabilityZone         string          `json:"availability_zone,omitempty"`
	Remaining                []wireSelection `json:"remaining"`
	Attempts                 []Attempt       `json:"attempts"`
	Group                    string          `json:"group,omitempty"`
}

// wireSelection is a Selection as an Alternates record stores it: a nil
// member takes the value the record implies (above).
type wireSelection struct {
	ComputeNodeUUID          string          `json:"compute_node_uuid"`
	ServiceHost              string          `json:"service_host"`
	Nodename                 *string         `json:"nodename,omitempty"`
	Cell                     *string         `json:"cell_uuid,omitempty"`
	Limits                   map[string]any  `json:"limits,omitempty"`
	AllocationRequest        string          `json:"allocation_request,omitempty"`
	Resources                json.RawMessage `json:"resources,omitempty"`
	AllocationRequestVersion *string         `json:"allocation_request_version,omitempty"`
	AvailabilityZone         *string         `json:"availability_zone,omitempty"`
}

// allocationRequestHead is what a single-provider allocation request
// holds before its resources; allocationRequestTail after them.
const allocationRequestTail = `}}}`

func allocationRequestHead(provider string) string {
	return `{"allocations":{"` + provider + `":{"resources":`
}

// singleProviderResources returns R when s is exactly the single-provider
// allocation request of provider with resources R, and R is one JSON
// object that json.Marshal would copy byte for byte (compact, plain
// ASCII, nothing it escapes), so that writing R raw and rebuilding s from
// it gives s back.
func singleProviderResources(s, provider string) (string, bool) {
	const head, mid = `{"allocations":{"`, `":{"resources":`
	if !strings.HasPrefix(s, head) || !strings.HasPrefix(s[len(head):], provider) ||
		!strings.HasPrefix(s[len(head)+len(provider):], mid) || !strings.HasSuffix(s, allocationRequestTail) {
		return "", false
	}
	from, to := len(head)+len(provider)+len(mid), len(s)-len(allocationRequestTail)
	if to-from < 2 {
		return "", false
	}
	r := s[from:to]
	if r[0] != '{' || r[len(r)-1] != '}' {
		return "", false
	}
	for i := 0; i < len(r); i++ {
		switch c := r[i]; {
		case c >= utf8.RuneSelf, c <= ' ', c == '<', c == '>', c == '&':
			return "", false
		}
	}
	if !json.Valid([]byte(r)) {
		return "", false
	}
	return r, true
}

// shared is what every selection has in the member of, "" when they
// differ (or there are none).
func shared(sels []Selection, of func(*Selection) string) string {
	if len(sels) == 0 {
		return ""
	}
	v := of(&sels[0])
	for i := range sels[1:] {
		if of(&sels[i+1]) != v {
			return ""
		}
	}
	return v
}

func requestVersionOf(s *Selection) string { return s.AllocationRequestVersion }
func zoneOf(s *Selection) string           { return s.AvailabilityZone }

// MarshalJSON writes the record in its stored form (the version stamped
// on it by Encode; this build writes version 2). The fast encoder
// (appendJSON) writes the same bytes.
func (a *Alternates) MarshalJSON() ([]byte, error) {
	w := wireAlternates{Version: a.Version, InstanceUUID: a.InstanceUUID, Cell: a.Cell, MaxAttempts: a.MaxAttempts,
		Attempts: a.Attempts, Group: a.Group}
	if a.Version < 2 {
		// A version 1 record (a test's, or one being copied as read)
		// keeps version 1's form: every member written.
		w.Remaining = wireSelectionsV1(a.Remaining)
		return json.Marshal(&w)
	}
	w.AllocationRequestVersion, w.AvailabilityZone = shared(a.Remaining, requestVersionOf), shared(a.Remaining, zoneOf)
	if a.Remaining != nil {
		w.Remaining = make([]wireSelection, len(a.Remaining))
		for i := range a.Remaining {
			w.Remaining[i] = compactSelection(&a.Remaining[i], a.Cell, w.AllocationRequestVersion, w.AvailabilityZone)
		}
	}
	return json.Marshal(&w)
}

func wireSelectionsV1(sels []Selection) []wireSelection {
	if sels == nil {
		return nil
	}
	out := make([]wireSelection, len(sels))
	for i := range sels {
		s := &sels[i]
		out[i] = wireSelection{ComputeNodeUUID: s.ComputeNodeUUID, ServiceHost: s.ServiceHost,
			Nodename: &s.Nodename, Cell: &s.Cell, Limits: s.Limits, AllocationRequest: s.AllocationRequest}
		if s.AllocationRequestVersion != "" {
			out[i].AllocationRequestVersion = &s.AllocationRequestVersion
		}
		if s.AvailabilityZone != "" {
			out[i].AvailabilityZone = &s.AvailabilityZone
		}
	}
	return out
}

func compactSelection(s *Selection, cell, arv, zone string) wireSelection {
	w := wireSelection{ComputeNodeUUID: s.ComputeNodeUUID, ServiceHost: s.ServiceHost, Limits: s.Limits,
		AllocationRequest: s.AllocationRequest}
	if s.Nodename != s.ServiceHost {
		w.Nodename = &s.Nodename
	}
	if s.Cell != cell {
		w.Cell = &s.Cell
	}
	if r, ok := singleProviderResources(s.AllocationRequest, s.ComputeNodeUUID); ok {
		w.AllocationRequest, w.Resources = "", json.RawMessage(r)
	}
	if s.AllocationRequestVersion != arv {
		w.AllocationRequestVersion = &s.AllocationRequestVersion
	}
	if s.AvailabilityZone != zone {
		w.AvailabilityZone = &s.AvailabilityZone
	}
	return w
}

// UnmarshalJSON reads either version; Decode then refuses a version this
// build does not know.
func (a *Alternates) UnmarshalJSON(data []byte) error {
	var w wireAlternates
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*a = Alternates{InstanceUUID: w.InstanceUUID, Cell: w.Cell, MaxAttempts: w.MaxAttempts, Attempts: w.Attempts,
		Group: w.Group}
	a.Version = w.Version
	if w.Remaining == nil {
		return nil
	}
	a.Remaining = make([]Selection, len(w.Remaining))
	for i := range w.Remaining {
		ws := &w.Remaining[i]
		s := Selection{ComputeNodeUUID: ws.ComputeNodeUUID, ServiceHost: ws.ServiceHost, Nodename: ws.ServiceHost,
			Cell: w.Cell, Limits: ws.Limits, AllocationRequest: ws.AllocationRequest,
			AllocationRequestVersion: w.AllocationRequestVersion, AvailabilityZone: w.AvailabilityZone}
		if ws.Nodename != nil {
			s.Nodename = *ws.Nodename
		}
		if ws.Cell != nil {
			s.Cell = *ws.Cell
		}
		if ws.AllocationRequestVersion != nil {
			s.AllocationRequestVersion = *ws.AllocationRequestVersion
		}
		if ws.AvailabilityZone != nil {
			s.AvailabilityZone = *ws.AvailabilityZone
		}
		if len(ws.Resources) > 0 {
			if ws.AllocationRequest != "" {
				return fmt.Errorf("alternate %s: both an allocation request and its resources", ws.ComputeNodeUUID)
			}
			s.AllocationRequest = allocationRequestHead(ws.ComputeNodeUUID) + string(ws.Resources) + allocationRequestTail
		}
		a.Remaining[i] = s
	}
	return nil
}

// appendJSON writes what MarshalJSON writes, declining a selection with
// limits (values of any type: json.Marshal's) and a version 1 record.
func (a *Alternates) appendJSON(b []byte) ([]byte, bool) {
	if a.Version < 2 {
		return nil, false
	}
	var ok bool
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(a.Version), 10)
	b = append(b, `,"instance_uuid":`...)
	b = appendJSONString(b, a.InstanceUUID)
	b = append(b, `,"cell":`...)
	b = appendJSONString(b, a.Cell)
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(a.MaxAttempts), 10)
	arv, zone := shared(a.Remaining, requestVersionOf), shared(a.Remaining, zoneOf)
	b = appendOptString(b, `,"allocation_request_version":`, arv)
	b = appendOptString(b, `,"availability_zone":`, zone)
	b = append(b, `,"remaining":`...)
	if a.Remaining == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range a.Remaining {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendCompactSelection(b, &a.Remaining[i], a.Cell, arv, zone); !ok {
				return nil, false
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"attempts":`...)
	if b, ok = appendAttempts(b, a.Attempts); !ok {
		return nil, false
	}
	b = appendOptString(b, `,"group":`, a.Group)
	return append(b, '}'), true
}

// appendCompactSelection appends compactSelection's encoding of s.
func appendCompactSelection(b []byte, s *Selection, cell, arv, zone string) ([]byte, bool) {
	if len(s.Limits) > 0 {
		return nil, false
	}
	b = append(b, `{"compute_node_uuid":`...)
	b = appendJSONString(b, s.ComputeNodeUUID)
	b = append(b, `,"service_host":`...)
	b = appendJSONString(b, s.ServiceHost)
	if s.Nodename != s.ServiceHost {
		b = append(b, `,"nodename":`...)
		b = appendJSONString(b, s.Nodename)
	}
	if s.Cell != cell {
		b = append(b, `,"cell_uuid":`...)
		b = appendJSONString(b, s.Cell)
	}
	if r, ok := singleProviderResources(s.AllocationRequest, s.ComputeNodeUUID); ok {
		b = append(b, `,"resources":`...)
		b = append(b, r...)
	} else {
		b = appendOptString(b, `,"allocation_request":`, s.AllocationRequest)
	}
	if s.AllocationRequestVersion != arv {
		b = append(b, `,"allocation_request_version":`...)
		b = appendJSONString(b, s.AllocationRequestVersion)
	}
	if s.AvailabilityZone != zone {
		b = append(b, `,"availability_zone":`...)
		b = appendJSONString(b, s.AvailabilityZone)
	}
	return append(b, '}'), true
}
