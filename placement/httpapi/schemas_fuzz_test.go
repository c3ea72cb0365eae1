package httpapi

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/berth-project/berth/internal/pycompat"
)

// FuzzValidateSchemas runs any JSON body, decoded as readJSON decodes it,
// through one of the schemas the API validates with (which, picks it;
// the seeds pair each body with every schema): the validator never
// panics, and its answer is nil or python-jsonschema's str(error) form,
// the same on a second run (the client's key order, not map order,
// decides between equal errors).
func FuzzValidateSchemas(f *testing.F) {
	schemas := allSchemas()
	for _, s := range []string{`{}`, `[]`, `null`, `"CUSTOM_X"`, `1.0`, `1e400`, `-0`,
		`{"resource_class": "DISK_GB", "total": 0}`,
		`{"name": "x", "uuid": "this is not a uuid", "parent_provider_uuid": null}`,
		`{"allocations": [{"resource_provider": {"uuid": "11111111-1111-1111-1111-111111111111"}, "resources": {"VCPU": 1}}]}`,
		`{"allocations": {}, "project_id": "", "user_id": "u", "consumer_generation": 1.5, "consumer_type": "A"}`,
		`{"11111111-1111-1111-1111-111111111111": {"allocations": {}, "project_id": "p", "user_id": "u", "consumer_generation": null, "mappings": {}}}`,
		`{"resources01": "VCPU:1", "resources1@": "x", "group_policy": "bad", "limit": "0"}`,
		`{"traits": ["", 5], "resource_provider_generation": "0"}`,
		`{"inventories": {"x": {"resource_provider_generation": 1, "inventories": {"vcpu": {"total": 1}}}}, "allocations": {"y": 1}}`,
	} {
		for i := range schemas {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return
		}
		if _, err := dec.Token(); err == nil {
			return // extra data: readJSON refuses it
		}
		order := pycompat.JSONKeyOrder(b)
		i := int(which) % len(schemas)
		e := pycompat.Validate(v, schemas[i], order)
		if e == nil {
			return
		}
		msg := e.String()
		if !strings.Contains(msg, "\n\nFailed validating ") || !strings.Contains(msg, "\n\nOn instance") {
			t.Fatalf("schema %d, body %q: %q is not str(ValidationError)", i, b, msg)
		}
		if again := pycompat.Validate(v, schemas[i], order); again == nil || again.String() != msg {
			t.Fatalf("schema %d, body %q: a second run answers otherwise", i, b)
		}
	})
}
