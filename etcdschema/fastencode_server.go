package etcdschema

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// A superconductor's hand-off writes a server's instance, its mapping
// and its build cast (and a cell conductor and agent write the instance
// again as it builds): json.Marshal's reflection on them was half of
// the hand-off's CPU. These write them as fastencode_placement.go
// writes the placement records: in the structs' field order with their
// tags' names, omitempty members left out as json.Marshal leaves them,
// compared byte for byte with json.Marshal by a test. An Instance with
// a part written rarely (a fault, failed attempts, shelving) is left to
// json.Marshal.

func (b *Build) sizeHint() int {
	return 384 + len(b.InstanceUUID) + len(b.Name) + len(b.Cell) + len(b.ProjectID) + len(b.UserID) +
		len(b.RequestID) + 64*len(b.Flavor.ExtraSpecs)
}

func (b *Build) appendJSON(out []byte) ([]byte, bool) {
	out, ok := b.appendHead(out, false)
	if !ok {
		return nil, false
	}
	if len(b.Instance) > 0 {
		out = append(out, `,"instance":`...)
		if out, ok = appendRawJSON(out, b.Instance); !ok {
			return nil, false
		}
	}
	if len(b.Alternates) > 0 {
		out = append(out, `,"alternates":`...)
		if out, ok = appendRawJSON(out, b.Alternates); !ok {
			return nil, false
		}
	}
	return append(out, '}'), true
}

// appendHead is the cast's object up to its carried records (instance,
// alternates) and the closing brace: every field json.Marshal writes
// before them. EncodeCast appends the carried records itself. With
// compact (a version 2 cast, cast_compact.go) the members its instance
// holds are left out.
func (b *Build) appendHead(out []byte, compact bool) ([]byte, bool) {
	if b.Move != nil {
		return nil, false // a move step, written rarely: json.Marshal's
	}
	out = append(out, `{"version":`...)
	out = strconv.AppendInt(out, int64(b.Version), 10)
	out = append(out, `,"op":`...)
	out = appendJSONString(out, b.Op)
	var ok bool
	if !compact {
		out = append(out, `,"instance_uuid":`...)
		out = appendJSONString(out, b.InstanceUUID)
		out = append(out, `,"name":`...)
		out = appendJSONString(out, b.Name)
		out = append(out, `,"cell":`...)
		out = appendJSONString(out, b.Cell)
		out = append(out, `,"flavor":`...)
		if out, ok = appendFlavor(out, &b.Flavor); !ok {
			return nil, false
		}
		out = append(out, `,"project_id":`...)
		out = appendJSONString(out, b.ProjectID)
		out = append(out, `,"user_id":`...)
		out = appendJSONString(out, b.UserID)
	}
	out = append(out, `,"attempt":`...)
	out = strconv.AppendInt(out, int64(b.Attempt), 10)
	if b.RequestID != "" && !compact {
		out = append(out, `,"request_id":`...)
		out = appendJSONString(out, b.RequestID)
	}
	out = append(out, `,"cast_at":`...)
	if out, ok = appendJSONTime(out, b.CastAt); !ok {
		return nil, false
	}
	if b.Image != nil {
		out = append(out, `,"image":`...)
		out = appendBootImage(out, b.Image)
	}
	return out, true
}

// appendRawJSON appends raw as json.Marshal writes a json.RawMessage:
// compacted, and with <, >, & and U+2028/U+2029 escaped. It declines
// (false) raw holding any of those characters or any byte outside ASCII,
// leaving such a record to json.Marshal, and invalid JSON, where
// json.Marshal fails. A cast's carried records were written by Encode,
// so they are compact and escaped already: such bytes are checked
// (one pass, then skipValue's grammar check) and copied, and only
// others go through json.Compact.
func appendRawJSON(out, raw []byte) ([]byte, bool) {
	compact, inStr, esc := true, false, false
	for _, c := range raw {
		switch {
		case c == '<' || c == '>' || c == '&' || c >= utf8.RuneSelf:
			return nil, false
		case esc:
			esc = false
		case inStr:
			esc, inStr = c == '\\', c != '"'
		case c == '"':
			inStr = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			compact = false
		}
	}
	if compact {
		// No whitespace outside strings: json.Compact would return raw
		// unchanged if it is one valid value, which skipValue checks as
		// encoding/json's scanner does (a value it declines, nested past
		// its depth, is left to json.Compact).
		r := jsonReader{data: raw}
		if r.skipValue(0) && r.i == len(raw) {
			return append(out, raw...), true
		}
	}
	buf := bytes.NewBuffer(out)
	if err := json.Compact(buf, raw); err != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

func (m *InstanceMapping) sizeHint() int {
	return 128 + len(m.InstanceUUID) + len(m.Cell) + len(m.ProjectID)
}

func (m *InstanceMapping) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(m.Version), 10)
	b = append(b, `,"instance_uuid":`...)
	b = appendJSONString(b, m.InstanceUUID)
	b = append(b, `,"cell":`...)
	b = appendJSONString(b, m.Cell)
	b = append(b, `,"project_id":`...)
	b = appendJSONString(b, m.ProjectID)
	b = append(b, `,"created_at":`...)
	b, ok := appendJSONTime(b, m.CreatedAt)
	if !ok {
		return nil, false
	}
	return append(b, '}'), true
}

func (in *Instance) sizeHint() int {
	return 640 + len(in.UUID) + len(in.Name) + len(in.Host) + len(in.Node) + len(in.Cell) + len(in.ProjectID) +
		len(in.UserID) + len(in.RequestID) + 64*(len(in.Flavor.ExtraSpecs)+len(in.Metadata))
}

func (in *Instance) appendJSON(b []byte) ([]byte, bool) {
	if in.Fault != nil || len(in.FailedAttempts) > 0 || in.Shelve != nil || len(in.ShelveActions) > 0 {
		return nil, false // written rarely: json.Marshal's
	}
	var ok bool
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(in.Version), 10)
	b = append(b, `,"uuid":`...)
	b = appendJSONString(b, in.UUID)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, in.Name)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, in.Status)
	b = appendOptString(b, `,"task_state":`, in.TaskState)
	b = appendOptString(b, `,"host":`, in.Host)
	b = appendOptString(b, `,"node":`, in.Node)
	b = append(b, `,"cell":`...)
	b = appendJSONString(b, in.Cell)
	b = append(b, `,"flavor":`...)
	if b, ok = appendFlavor(b, &in.Flavor); !ok {
		return nil, false
	}
	b = append(b, `,"project_id":`...)
	b = appendJSONString(b, in.ProjectID)
	b = append(b, `,"user_id":`...)
	b = appendJSONString(b, in.UserID)
	b = appendOptString(b, `,"availability_zone":`, in.AvailabilityZone)
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(in.Attempts), 10)
	if b, ok = appendTimes(b, in.CreatedAt, in.UpdatedAt); !ok {
		return nil, false
	}
	b = b[:len(b)-1] // appendTimes closed the object; more members follow
	if in.Image != nil {
		b = append(b, `,"image":`...)
		b = appendBootImage(b, in.Image)
	}
	if len(in.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		b = appendJSONStringMap(b, in.Metadata)
	}
	if in.Description != nil {
		b = append(b, `,"description":`...)
		b = appendJSONString(b, *in.Description)
	}
	b = appendOptString(b, `,"reservation_id":`, in.ReservationID)
	if in.LaunchIndex != 0 {
		b = append(b, `,"launch_index":`...)
		b = strconv.AppendInt(b, int64(in.LaunchIndex), 10)
	}
	b = appendOptString(b, `,"group":`, in.Group)
	b = appendOptString(b, `,"request_id":`, in.RequestID)
	b = appendOptString(b, `,"delete_request_id":`, in.DeleteRequestID)
	b = appendOptString(b, `,"migration_uuid":`, in.MigrationUUID)
	b = appendOptString(b, `,"requested_availability_zone":`, in.RequestedAZ)
	return append(b, '}'), true
}

// appendOptString appends an omitempty string member (name is its
// quoted name with the leading comma and the colon).
func appendOptString(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, name...)
	return appendJSONString(b, s)
}

// appendFlavor appends a Flavor as json.Marshal writes it nested in a
// record (its header's version as it holds it).
func appendFlavor(b []byte, f *Flavor) ([]byte, bool) {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(f.Version), 10)
	b = append(b, `,"id":`...)
	b = appendJSONString(b, f.ID)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, f.Name)
	b = append(b, `,"vcpus":`...)
	b = strconv.AppendInt(b, int64(f.VCPUs), 10)
	b = append(b, `,"ram":`...)
	b = strconv.AppendInt(b, int64(f.RAMMB), 10)
	b = append(b, `,"disk":`...)
	b = strconv.AppendInt(b, int64(f.DiskGB), 10)
	b = append(b, `,"ephemeral":`...)
	b = strconv.AppendInt(b, int64(f.EphemeralGB), 10)
	b = append(b, `,"swap":`...)
	b = strconv.AppendInt(b, int64(f.SwapMB), 10)
	if len(f.ExtraSpecs) > 0 {
		b = append(b, `,"extra_specs":`...)
		b = appendJSONStringMap(b, f.ExtraSpecs)
	}
	if f.Description != nil {
		b = append(b, `,"description":`...)
		b = appendJSONString(b, *f.Description)
	}
	if f.RXTXFactor != 0 {
		b = append(b, `,"rxtx_factor":`...)
		var ok bool
		if b, ok = appendJSONFloat(b, f.RXTXFactor); !ok {
			return nil, false
		}
	}
	if f.Private {
		b = append(b, `,"private":true`...)
	}
	if len(f.Projects) > 0 {
		b = append(b, `,"projects":`...)
		b = appendJSONStrings(b, f.Projects)
	}
	return append(b, '}'), true
}

// appendBootImage appends a (non-nil) BootImage.
func appendBootImage(b []byte, im *BootImage) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, im.ID)
	b = appendOptString(b, `,"name":`, im.Name)
	if len(im.Command) > 0 {
		b = append(b, `,"command":`...)
		b = appendJSONStrings(b, im.Command)
	}
	return append(b, '}')
}

// appendJSONStringMap appends a map[string]string: null when nil, keys
// in json.Marshal's order.
func appendJSONStringMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var buf [8]string
	b = append(b, '{')
	for i, k := range sortedKeys(m, buf[:]) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, m[k])
	}
	return append(b, '}')
}

// A create writes a QuotaInstance per server (W1): its one member is the
// time.
func (q *QuotaInstance) sizeHint() int { return 64 }

func (q *QuotaInstance) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(q.Version), 10)
	b = append(b, `,"created_at":`...)
	b, ok := appendJSONTime(b, q.CreatedAt)
	if !ok {
		return nil, false
	}
	return append(b, '}'), true
}
