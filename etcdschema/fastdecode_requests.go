package etcdschema

// A superconductor decodes every BuildRequest it is offered (its Defer
// hook reads the reservation and index of each): encoding/json's
// reflection on it was 0.2 s of the superconductor's 3.9 s in a
// 10,000-server boot. This reads it as fastdecode_casts.go reads a cast,
// with the same rules: exact names, each once, a copy stored only on
// success (a value declined halfway reaches encoding/json as it was).

func (br *BuildRequest) decodeFast(data []byte) bool {
	if !br.Flavor.fastDecodable() || br.Image != nil || br.Metadata != nil || br.Description != nil {
		// encoding/json would merge into the existing map, or write
		// through the existing pointer.
		return false
	}
	q := *br
	r := jsonReader{data: data}
	ok := r.members(func(name []byte) (bit uint32, ok bool) {
		var n int64
		switch string(name) {
		case "version":
			n, ok = r.int64()
			q.Version, bit = int(n), 1<<0
		case "instance_uuid":
			q.InstanceUUID, ok = r.string()
			bit = 1 << 1
		case "name":
			q.Name, ok = r.string()
			bit = 1 << 2
		case "reservation_id":
			q.ReservationID, ok = r.string()
			bit = 1 << 3
		case "index":
			n, ok = r.int64()
			q.Index, bit = int(n), 1<<4
		case "count":
			n, ok = r.int64()
			q.Count, bit = int(n), 1<<5
		case "flavor":
			// Into q's own Flavor, as encoding/json decodes into the
			// existing struct.
			ok = r.flavor(&q.Flavor, true)
			bit = 1 << 6
		case "project_id":
			q.ProjectID, ok = r.string()
			bit = 1 << 7
		case "user_id":
			q.UserID, ok = r.string()
			bit = 1 << 8
		case "availability_zone":
			q.AvailabilityZone, ok = r.string()
			bit = 1 << 9
		case "scheduler_hints":
			ok = r.hints(&q.Hints)
			bit = 1 << 10
		case "request_id":
			q.RequestID, ok = r.string()
			bit = 1 << 11
		case "created_at":
			q.CreatedAt, ok = r.time()
			bit = 1 << 12
		case "host":
			q.Host, ok = r.string()
			bit = 1 << 13
		case "hypervisor_hostname":
			q.Node, ok = r.string()
			bit = 1 << 14
		case "image":
			q.Image, ok = r.image(true)
			bit = 1 << 15
		case "metadata":
			q.Metadata, ok = r.stringMap()
			bit = 1 << 16
		case "description":
			q.Description, ok = r.stringPtr()
			bit = 1 << 17
		case "forced_host":
			q.Forced, ok = r.bool()
			bit = 1 << 18
		}
		return
	})
	if !ok || !r.end() {
		return false
	}
	*br = q
	return true
}

// hints reads a SchedulerHints object into h, as encoding/json decodes
// into the existing struct (members the input lacks are kept). null is
// declined, as flavor declines it.
func (r *jsonReader) hints(h *SchedulerHints) bool {
	return r.members(func(name []byte) (bit uint32, ok bool) {
		switch string(name) {
		case "same_host":
			h.SameHost, ok = r.strings()
			bit = 1
		case "different_host":
			h.DifferentHost, ok = r.strings()
			bit = 2
		case "group":
			h.Group, ok = r.string()
			bit = 4
		}
		return
	})
}

// stringPtr reads a *string field into a new string (the caller's was
// nil); null gives nil, as encoding/json sets a pointer for null.
func (r *jsonReader) stringPtr() (*string, bool) {
	if r.null() {
		return nil, true
	}
	s, ok := r.string()
	if !ok {
		return nil, false
	}
	return &s, true
}
