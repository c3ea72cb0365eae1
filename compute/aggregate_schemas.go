package compute

// The schemas of os-aggregates, os-server-groups and limits in Nova 26,
// keyword for keyword and in their order: schemas/aggregates.py,
// server_groups.py, limits.py and the parameter_types they use. (Nova's
// aggregates schemas also list a property named "type" whose schema is
// the string 'object', a slip that accepts such a member; Berth refuses
// it as an additional property.)

// nameSchema is parameter_types.name.
var nameSchema = schema{kType{"string"}, kMinLength(1), kMaxLength(255), kFormatName{}}

// azNameOrNull is aggregates.availability_zone: oneOf az_name or null.
var azNameOrNull = schema{kOneOf{
	{kType{"string"}, kMinLength(1), kMaxLength(255), kFormatAZName{}},
	{kType{"null"}},
}}

// fqdn is parameter_types.fqdn.
var fqdn = schema{kType{"string"}, kMinLength(1), kMaxLength(255),
	rePattern(`^[a-zA-Z0-9-._]*$`, `^[a-zA-Z0-9\-._]*\n?\z`)}

// metadataWithNull is parameter_types.metadata_with_null.
var metadataWithNull = schema{kType{"object"},
	kPatternProperties{pattern: extraSpecKey, s: schema{kType{"string", "null"}, kMaxLength(255)}},
	kNoAdditional{pattern: &extraSpecKey}}

// object is {"type": "object", "properties": props, "required": req,
// "additionalProperties": false}, the shape of most of these schemas.
func object(props kProperties, req ...string) schema {
	names := make([]string, len(props))
	for i, p := range props {
		names[i] = p.name
	}
	s := schema{kType{"object"}, props}
	if len(req) > 0 {
		s = append(s, kRequired(req))
	}
	return append(s, kNoAdditional{props: names})
}

var (
	schemaAggregateCreate = wrapped("aggregate", object(kProperties{
		{"name", nameSchema}, {"availability_zone", azNameOrNull}}, "name"))
	schemaAggregateUpdate = wrapped("aggregate", append(object(kProperties{
		{"name", schema{kType{"string"}, kMinLength(1), kMaxLength(255), kFormatNameSpaces{}}},
		{"availability_zone", azNameOrNull}}),
		kAnyOf{{kRequired{"name"}}, {kRequired{"availability_zone"}}}))
	schemaAggregateAddHost      = wrapped("add_host", object(kProperties{{"host", fqdn}}, "host"))
	schemaAggregateRemoveHost   = wrapped("remove_host", object(kProperties{{"host", fqdn}}, "host"))
	schemaAggregateSetMetadata  = wrapped("set_metadata", object(kProperties{{"metadata", metadataWithNull}}, "metadata"))
	schemaServerGroupCreate     = serverGroupCreate("anti-affinity", "affinity")
	schemaServerGroupCreate2_15 = serverGroupCreate("anti-affinity", "affinity", "soft-anti-affinity", "soft-affinity")
	schemaServerGroupCreate2_64 = wrapped("server_group", object(kProperties{
		{"name", nameSchema},
		{"policy", schema{kType{"string"}, kEnum{"anti-affinity", "affinity", "soft-anti-affinity", "soft-affinity"}}},
		{"rules", object(kProperties{{"max_server_per_host", positiveInteger}})},
	}, "name", "policy"))
)

// serverGroupCreate is server_groups.create (create_v215 with the soft
// policies): one policy in a list.
func serverGroupCreate(policies ...any) schema {
	return wrapped("server_group", object(kProperties{
		{"name", nameSchema},
		{"policies", schema{kType{"array"}, kTupleItems{{kType{"string"}, kEnum(policies)}},
			kUniqueItems{}, kMinItems(1), kMaxItems(1), kNoAdditionalItems(1)}},
	}, "name", "policies"))
}

// positiveInteger and nonNegativeInteger are parameter_types'.
var (
	positiveInteger = schema{kType{"integer", "string"}, rePattern(`^[0-9]*$`, `^[0-9]*\n?\z`),
		kMinimum{limit: 1, text: "1"}, kMinLength(1)}
	nonNegativeInteger = schema{kType{"integer", "string"}, rePattern(`^[0-9]*$`, `^[0-9]*\n?\z`),
		kMinimum{limit: 0, text: "0"}, kMinLength(1)}
)

// multiParams is parameter_types.multi_params: a query parameter's
// values, each checked by s.
func multiParams(s schema) schema { return schema{kType{"array"}, kItems{s}} }

// queryObject is a query schema of props; strict (2.75 on) refuses any
// other parameter.
func queryObject(strict bool, props kProperties) schema {
	s := schema{kType{"object"}, props}
	if strict {
		names := make([]string, len(props))
		for i, p := range props {
			names[i] = p.name
		}
		s = append(s, kNoAdditional{props: names})
	}
	return s
}

// serverGroupsQuery is server_groups_query_param (_275 when strict).
func serverGroupsQuery(strict bool) schema {
	return queryObject(strict, kProperties{
		{"all_projects", multiParams(schema{kType{"string"}})},
		{"limit", multiParams(nonNegativeInteger)},
		{"offset", multiParams(nonNegativeInteger)},
	})
}

// limitsQuery is limits_query_schema (_275 when strict).
func limitsQuery(strict bool) schema {
	return queryObject(strict, kProperties{{"tenant_id", multiParams(schema{kType{"string"}})}})
}
