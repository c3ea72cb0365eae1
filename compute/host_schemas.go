package compute

// The schemas of nova/api/openstack/compute/schemas/services.py and
// hypervisors.py (parameter_types' fqdn, multi_params and the query
// macros are in aggregate_schemas.go).

// booleanParam is parameter_types.boolean.
var booleanParam = schema{kType{"boolean", "string"}, booleanEnum}

var reasonParam = schema{kType{"string"}, kMinLength(1), kMaxLength(255)}

func serviceUpdate(forcedDown bool) schema {
	props := kProperties{
		{"host", fqdn},
		{"binary", schema{kType{"string"}, kMinLength(1), kMaxLength(255)}},
		{"disabled_reason", reasonParam},
	}
	names := []string{"host", "binary", "disabled_reason"}
	if forcedDown {
		props = append(props, prop{"forced_down", booleanParam})
		names = append(names, "forced_down")
	}
	return schema{kType{"object"}, props, kRequired{"host", "binary"}, kNoAdditional{props: names}}
}

var (
	schemaServiceUpdate     = serviceUpdate(false)
	schemaServiceUpdate2_11 = serviceUpdate(true)
	schemaServiceUpdate2_53 = schema{kType{"object"}, kProperties{
		{"status", schema{kType{"string"}, kEnum{"enabled", "disabled"}}},
		{"disabled_reason", reasonParam},
		{"forced_down", booleanParam},
	}, kNoAdditional{props: []string{"status", "disabled_reason", "forced_down"}}}
)

// serviceUpdateSchema is update's @validation.schema per version: the
// old actions' bodies before 2.53 (forced_down from 2.11), the status
// body from 2.53.
func serviceUpdateSchema(v version) schema {
	switch {
	case v.atLeast(53):
		return schemaServiceUpdate2_53
	case v.atLeast(11):
		return schemaServiceUpdate2_11
	}
	return schemaServiceUpdate
}

func singleParam(s schema) schema { return schema{kType{"array"}, kItems{s}, kMaxItems(1)} }

var (
	// services.index_query_schema (lenient) and _275 (strict).
	schemaServicesQuery = schema{kType{"object"}, kProperties{
		{"host", multiParams(schema{kType{"string"}})}, {"binary", multiParams(schema{kType{"string"}})}}}
	schemaServicesQuery2_75 = queryObject(true, kProperties{
		{"host", multiParams(schema{kType{"string"}})}, {"binary", multiParams(schema{kType{"string"}})}})

	// hypervisors.list_query_schema_v233, _v253 and show_query_schema_v253.
	schemaHypervisorsQuery2_33 = schema{kType{"object"}, kProperties{
		{"limit", multiParams(nonNegativeInteger)}, {"marker", multiParams(schema{kType{"string"}})}}}
	schemaHypervisorsQuery2_53 = queryObject(true, kProperties{
		{"limit", singleParam(nonNegativeInteger)},
		{"marker", singleParam(schema{kType{"string"}})},
		{"hypervisor_hostname_pattern", singleParam(fqdn)},
		{"with_servers", singleParam(booleanParam)},
	})
	schemaHypervisorShowQuery2_53 = queryObject(true, kProperties{{"with_servers", singleParam(booleanParam)}})
)

// pyTrue is strutils.bool_from_string(s) for the values the boolean
// schema lets through.
func pyTrue(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		switch x {
		case "1", "t", "true", "on", "y", "yes", "True", "TRUE", "On", "ON", "Yes", "YES":
			return true
		}
	}
	return false
}
