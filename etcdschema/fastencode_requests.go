package etcdschema

import "strconv"

// The other records a boot writes once per server through json.Marshal's
// reflection: the create's BuildRequest (W1), the superconductor's lease
// on it (the work queue's acquire) and the Alternates its hand-off
// carries in the build cast. These write them as fastencode_server.go
// writes the hand-off's records: in the structs' field order with their
// tags' names, omitempty members left out as json.Marshal leaves them,
// compared byte for byte with json.Marshal by a test. The Alternates'
// own encoder (its compact version 2 form) is in alternates_compact.go.

func (br *BuildRequest) sizeHint() int {
	n := 512 + len(br.InstanceUUID) + len(br.Name) + len(br.ReservationID) + len(br.ProjectID) + len(br.UserID) +
		len(br.RequestID) + 64*(len(br.Flavor.ExtraSpecs)+len(br.Metadata))
	for _, h := range br.Hints.SameHost {
		n += len(h) + 3
	}
	for _, h := range br.Hints.DifferentHost {
		n += len(h) + 3
	}
	return n
}

func (br *BuildRequest) appendJSON(b []byte) ([]byte, bool) {
	var ok bool
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(br.Version), 10)
	b = append(b, `,"instance_uuid":`...)
	b = appendJSONString(b, br.InstanceUUID)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, br.Name)
	b = append(b, `,"reservation_id":`...)
	b = appendJSONString(b, br.ReservationID)
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(br.Index), 10)
	b = append(b, `,"count":`...)
	b = strconv.AppendInt(b, int64(br.Count), 10)
	b = append(b, `,"flavor":`...)
	if b, ok = appendFlavor(b, &br.Flavor); !ok {
		return nil, false
	}
	b = append(b, `,"project_id":`...)
	b = appendJSONString(b, br.ProjectID)
	b = append(b, `,"user_id":`...)
	b = appendJSONString(b, br.UserID)
	b = appendOptString(b, `,"availability_zone":`, br.AvailabilityZone)
	// omitempty does not omit a struct: the hints are always written.
	b = append(b, `,"scheduler_hints":`...)
	b = appendHints(b, &br.Hints)
	b = appendOptString(b, `,"request_id":`, br.RequestID)
	b = append(b, `,"created_at":`...)
	if b, ok = appendJSONTime(b, br.CreatedAt); !ok {
		return nil, false
	}
	b = appendOptString(b, `,"host":`, br.Host)
	b = appendOptString(b, `,"hypervisor_hostname":`, br.Node)
	if br.Image != nil {
		b = append(b, `,"image":`...)
		b = appendBootImage(b, br.Image)
	}
	if len(br.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		b = appendJSONStringMap(b, br.Metadata)
	}
	if br.Description != nil {
		b = append(b, `,"description":`...)
		b = appendJSONString(b, *br.Description)
	}
	if br.Forced {
		b = append(b, `,"forced_host":true`...)
	}
	return append(b, '}'), true
}

// appendHints appends SchedulerHints (every member omitempty).
func appendHints(b []byte, h *SchedulerHints) []byte {
	b = append(b, '{')
	sep := ""
	if len(h.SameHost) > 0 {
		b = append(b, `"same_host":`...)
		b = appendJSONStrings(b, h.SameHost)
		sep = ","
	}
	if len(h.DifferentHost) > 0 {
		b = append(b, sep...)
		b = append(b, `"different_host":`...)
		b = appendJSONStrings(b, h.DifferentHost)
		sep = ","
	}
	if h.Group != "" {
		b = append(b, sep...)
		b = append(b, `"group":`...)
		b = appendJSONString(b, h.Group)
	}
	return append(b, '}')
}

func (l *Lease) sizeHint() int { return 96 + len(l.Holder) }

func (l *Lease) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(l.Version), 10)
	b = append(b, `,"holder":`...)
	b = appendJSONString(b, l.Holder)
	b = append(b, `,"lease_id":`...)
	b = strconv.AppendInt(b, l.LeaseID, 10)
	b = append(b, `,"since":`...)
	b, ok := appendJSONTime(b, l.Since)
	if !ok {
		return nil, false
	}
	return append(b, '}'), true
}

func (a *Alternates) sizeHint() int {
	return 192 + len(a.InstanceUUID) + len(a.Cell) + len(a.Group) + 192*len(a.Remaining) + 96*len(a.Attempts)
}

// appendAttempts appends a []Attempt: null when nil, as json.Marshal.
func appendAttempts(b []byte, as []Attempt) ([]byte, bool) {
	if as == nil {
		return append(b, "null"...), true
	}
	var ok bool
	b = append(b, '[')
	for i := range as {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"host":`...)
		b = appendJSONString(b, as[i].Host)
		b = appendOptString(b, `,"reason":`, as[i].Reason)
		b = append(b, `,"at":`...)
		if b, ok = appendJSONTime(b, as[i].At); !ok {
			return nil, false
		}
		b = append(b, '}')
	}
	return append(b, ']'), true
}
