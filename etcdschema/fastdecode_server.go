package etcdschema

// Every server's boot decodes its Instance record where it is built (the
// agent decodes the copy its build cast carries, ~16 us with
// encoding/json's reflection, the largest record decode of a boot) and
// again wherever it is read (a cell conductor's retry, the API's GET, a
// watcher of the cell), and its InstanceMapping wherever the API looks
// a server up. These read them as fastdecode_casts.go reads a cast, with
// the same rules: exact names, each once, null only where encoding/json sets nil
// (a map, a slice, a pointer), a copy stored only on success (a value
// declined halfway reaches encoding/json as it was). An Instance with a
// part written rarely (a fault, failed attempts, shelving) is declined
// whole: encoding/json reads it, as json.Marshal writes it
// (fastencode_server.go).

// fastDecodable reports whether encoding/json would decode into f as
// into a zero Flavor's references: a map it would merge into, or a
// pointer it would write through, is left to it.
func (f *Flavor) fastDecodable() bool {
	return f.ExtraSpecs == nil && f.Description == nil && f.Projects == nil
}

func (in *Instance) decodeFast(data []byte) bool {
	if !in.Flavor.fastDecodable() || in.Image != nil || in.Metadata != nil || in.Description != nil {
		return false // encoding/json would merge into the map or write through the pointer
	}
	q := *in
	r := jsonReader{data: data}
	ok := r.members(func(name []byte) (bit uint32, ok bool) {
		var n int64
		switch string(name) {
		case "version":
			n, ok = r.int64()
			q.Version, bit = int(n), 1<<0
		case "uuid":
			q.UUID, ok = r.string()
			bit = 1 << 1
		case "name":
			q.Name, ok = r.string()
			bit = 1 << 2
		case "status":
			q.Status, ok = r.statusString()
			bit = 1 << 3
		case "task_state":
			q.TaskState, ok = r.statusString()
			bit = 1 << 4
		case "host":
			q.Host, ok = r.string()
			bit = 1 << 5
		case "node":
			q.Node, ok = r.string()
			bit = 1 << 6
		case "cell":
			q.Cell, ok = r.string()
			bit = 1 << 7
		case "flavor":
			// Into q's own Flavor, as encoding/json decodes into the
			// existing struct (members the input lacks are kept).
			ok = r.flavor(&q.Flavor, true)
			bit = 1 << 8
		case "project_id":
			q.ProjectID, ok = r.string()
			bit = 1 << 9
		case "user_id":
			q.UserID, ok = r.string()
			bit = 1 << 10
		case "availability_zone":
			q.AvailabilityZone, ok = r.string()
			bit = 1 << 11
		case "attempts":
			n, ok = r.int64()
			q.Attempts, bit = int(n), 1<<12
		case "created_at":
			q.CreatedAt, ok = r.time()
			bit = 1 << 13
		case "updated_at":
			q.UpdatedAt, ok = r.time()
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
		case "reservation_id":
			q.ReservationID, ok = r.string()
			bit = 1 << 18
		case "launch_index":
			n, ok = r.int64()
			q.LaunchIndex, bit = int(n), 1<<19
		case "group":
			q.Group, ok = r.string()
			bit = 1 << 20
		case "request_id":
			q.RequestID, ok = r.string()
			bit = 1 << 21
		case "delete_request_id":
			q.DeleteRequestID, ok = r.string()
			bit = 1 << 22
		case "migration_uuid":
			q.MigrationUUID, ok = r.string()
			bit = 1 << 23
		case "requested_availability_zone":
			q.RequestedAZ, ok = r.string()
			bit = 1 << 24
		}
		// fault, failed_attempts, shelve and shelve_actions are
		// unknown here (ok false): encoding/json reads the record.
		return
	})
	if !ok || !r.end() {
		return false
	}
	*in = q
	return true
}

// statusString reads an instance's status or task state, shared for
// the words a boot writes (every instance record a watcher keeps would
// hold its own copy of "ACTIVE").
func (r *jsonReader) statusString() (string, bool) {
	s, ok := r.str()
	if !ok {
		return "", false
	}
	switch string(s) {
	case StatusBuild:
		return StatusBuild, true
	case StatusActive:
		return StatusActive, true
	case StatusError:
		return StatusError, true
	case TaskScheduling:
		return TaskScheduling, true
	case TaskSpawning:
		return TaskSpawning, true
	case TaskDeleting:
		return TaskDeleting, true
	}
	return string(s), true
}

func (m *InstanceMapping) decodeFast(data []byte) bool {
	q := *m
	r := jsonReader{data: data}
	ok := r.members(func(name []byte) (bit uint32, ok bool) {
		switch string(name) {
		case "version":
			var n int64
			n, ok = r.int64()
			q.Version, bit = int(n), 1<<0
		case "instance_uuid":
			q.InstanceUUID, ok = r.string()
			bit = 1 << 1
		case "cell":
			q.Cell, ok = r.string()
			bit = 1 << 2
		case "project_id":
			q.ProjectID, ok = r.string()
			bit = 1 << 3
		case "created_at":
			q.CreatedAt, ok = r.time()
			bit = 1 << 4
		}
		return
	})
	if !ok || !r.end() {
		return false
	}
	*m = q
	return true
}
