package httpapi

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/berth-project/berth/internal/pycompat"
)

// TestSchemaErrorsMatchPlacement checks the validator's 400 texts against
// what OpenStack Placement 8.0 (python-jsonschema 4.10) says for the same
// body and schema: message, keyword, schema path, the pprint'ed sub-schema
// and instance. The expected texts were recorded from the reference.
func TestSchemaErrorsMatchPlacement(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		schema *pycompat.Schema
		body   string
		want   string // "" when the body is valid
	}{
		{"POST_INVENTORY_SCHEMA", schemaPostInventory, "{\"resource_class\":\"DISK_GB\",\"total\":0}", "0 is less than the minimum of 1\n\nFailed validating 'minimum' in schema['properties']['total']:\n    {'maximum': 2147483647, 'minimum': 1, 'type': 'integer'}\n\nOn instance['total']:\n    0"},
		{"POST_RP_SCHEMA_V1_14", schemaPostRP114, "{\"name\":\"x\",\"uuid\":\"this is not a uuid\"}", "'this is not a uuid' is not a 'uuid'\n\nFailed validating 'format' in schema['properties']['uuid']:\n    {'format': 'uuid', 'type': 'string'}\n\nOn instance['uuid']:\n    'this is not a uuid'"},
		{"ALLOCATION_SCHEMA", schemaPutAllocations[0], "{\"allocations\":[]}", "[] is too short\n\nFailed validating 'minItems' in schema['properties']['allocations']:\n    {'items': {'additionalProperties': False,\n               'properties': {'resource_provider': {'additionalProperties': False,\n                                                    'properties': {'uuid': {'format': 'uuid',\n                                                                            'type': 'string'}},\n                                                    'required': ['uuid'],\n                                                    'type': 'object'},\n                              'resources': {'additionalProperties': False,\n                                            'minProperties': 1,\n                                            'patternProperties': {'^[A-Z0-9_]+$': {'minimum': 1,\n                                                                                   'type': 'integer'}},\n                                            'type': 'object'}},\n               'required': ['resource_provider', 'resources'],\n               'type': 'object'},\n     'minItems': 1,\n     'type': 'array'}\n\nOn instance['allocations']:\n    []"},
		{"ALLOCATION_SCHEMA_V1_38", schemaPutAllocations[38], "{\"allocations\":{},\"project_id\":\"\",\"user_id\":\"u\",\"consumer_generation\":1.5,\"consumer_type\":\"A\"}", "1.5 is not of type 'integer', 'null'\n\nFailed validating 'type' in schema['properties']['consumer_generation']:\n    {'additionalProperties': False, 'type': ['integer', 'null']}\n\nOn instance['consumer_generation']:\n    1.5"},
		{"POST_ALLOCATIONS_V1_38", schemaPostAllocations[38], "{\"11111111-1111-1111-1111-111111111111\":{\"allocations\":{},\"project_id\":\"p\",\"user_id\":\"u\",\"consumer_generation\":null,\"consumer_type\":\"A\",\"mappings\":{}}}", "{} does not have enough properties\n\nFailed validating 'minProperties' in schema['patternProperties']['^[0-9a-fA-F-]{36}$']['properties']['mappings']:\n    {'minProperties': 1,\n     'patternProperties': {'[a-zA-Z0-9_-]{1,64}': {'items': {'format': 'uuid',\n                                                             'type': 'string'},\n                                                   'minItems': 1,\n                                                   'type': 'array'}},\n     'type': 'object'}\n\nOn instance['11111111-1111-1111-1111-111111111111']['mappings']:\n    {}"},
		{"GET_SCHEMA_1_33", schemaCandidates[33], "{\"resources01\":\"VCPU:1\"}", ""},
		{"GET_SCHEMA_1_25", schemaCandidates[25], "{\"resources01\":\"VCPU:1\", \"resources1@\":\"x\"}", "'resources01', 'resources1@' do not match any of the regexes: '^member_of([1-9][0-9]*)?$', '^required([1-9][0-9]*)?$', '^resources([1-9][0-9]*)?$'\n\nFailed validating 'additionalProperties' in schema:\n    {'additionalProperties': False,\n     'patternProperties': {'^member_of([1-9][0-9]*)?$': {'type': 'string'},\n                           '^required([1-9][0-9]*)?$': {'type': 'string'},\n                           '^resources([1-9][0-9]*)?$': {'type': 'string'}},\n     'properties': {'group_policy': {'enum': ['none', 'isolate'],\n                                     'type': 'string'},\n                    'limit': {'minLength': 1,\n                              'minimum': 1,\n                              'pattern': '^[1-9][0-9]*$',\n                              'type': ['integer', 'string']}},\n     'type': 'object'}\n\nOn instance:\n    {'resources01': 'VCPU:1', 'resources1@': 'x'}"},
		{"GET_SCHEMA_1_36", schemaCandidates[36], "{\"resources\":\"VCPU:1\", \"group_policy\":\"bad\"}", "'bad' is not one of ['none', 'isolate']\n\nFailed validating 'enum' in schema['properties']['group_policy']:\n    {'enum': ['none', 'isolate'], 'type': 'string'}\n\nOn instance['group_policy']:\n    'bad'"},
		{"SET_TRAITS_FOR_RP_SCHEMA", schemaSetProviderTraits, "{\"traits\":[\"\", 5],\"resource_provider_generation\":\"0\"}", "'0' is not of type 'integer'\n\nFailed validating 'type' in schema['properties']['resource_provider_generation']:\n    {'type': 'integer'}\n\nOn instance['resource_provider_generation']:\n    '0'"},
		{"POST_RC_SCHEMA_V1_2", schemaResourceClass, "{\"name\":\"it's \\\"x\\\"\\n\"}", "'it\\'s \"x\"\\n' does not match '^CUSTOM_[A-Z0-9_]+$'\n\nFailed validating 'pattern' in schema['properties']['name']:\n    {'maxLength': 255, 'pattern': '^CUSTOM_[A-Z0-9_]+$', 'type': 'string'}\n\nOn instance['name']:\n    'it\\'s \"x\"\\n'"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(tc.body))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			got := ""
			if e := pycompat.Validate(v, tc.schema, nil); e != nil {
				got = e.String()
			}
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// allSchemas lists every schema the API validates with (for tests).
func allSchemas() []*pycompat.Schema {
	all := []*pycompat.Schema{schemaInventory, schemaPostInventory, schemaPutInventories,
		schemaPostRP, schemaPutRP, schemaPostRP114, schemaPutRP114, schemaUsages, schemaUsages138,
		schemaCustomTrait, schemaSetProviderTraits, schemaListTraits, schemaResourceClass,
		schemaAggregates, schemaAggregates119}
	for _, m := range []map[int]*pycompat.Schema{schemaListProviders, schemaPutAllocations, schemaPostAllocations, schemaCandidates, schemaReshaper} {
		for _, mv := range sortedMinors(m) {
			all = append(all, m[mv])
		}
	}
	return all
}

// sortedMinors lists a map's microversions in order.
func sortedMinors(m map[int]*pycompat.Schema) []int {
	return slices.Sorted(maps.Keys(m))
}

// TestEverySchemaAnswers validates a few instances of each kind against
// every schema the API uses: each answer is nil or a message in
// python-jsonschema's form.
func TestEverySchemaAnswers(t *testing.T) {
	instances := []string{`{}`, `[]`, `"x"`, `1`, `1.5`, `null`, `true`, `{"a": [1, {"b": null}]}`,
		`{"resource_provider_generation": 1, "inventories": {"VCPU": {"total": 0}}}`}
	for i, sch := range allSchemas() {
		for _, in := range instances {
			dec := json.NewDecoder(strings.NewReader(in))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if e := pycompat.Validate(v, sch, nil); e != nil && !strings.Contains(e.String(), "\n\nFailed validating ") {
				t.Errorf("schema %d, instance %s: %q lacks python-jsonschema's form", i, in, e.String())
			}
		}
	}
}
