package compute

import "strings"

// The flavor schemas of Nova 26, keyword for keyword and in their order:
// nova/api/openstack/compute/schemas/flavor_manage.py, flavors.py,
// flavors_extraspecs.py, flavor_access.py and the parameter_types they
// use. Python's "$" also matches before a final newline; the Go patterns
// say so with \n?\z.

// flavorParam is parameter_types.volume_size (flavor_param_positive) or,
// with min 0, flavor_param_non_negative.
func flavorParam(min int) schema {
	text := "1"
	if min == 0 {
		text = "0"
	}
	return schema{kType{"integer", "string"}, rePattern(`^[0-9]+$`, `^[0-9]+\n?\z`),
		kMinimum{limit: float64(min), text: text}, kMaximum{limit: 0x7FFFFFFF, text: "2147483647"}}
}

// flavorIDPattern is '^(?! )[a-zA-Z0-9. _-]+(?<! )$'.
var flavorIDPattern = kPattern{src: `^(?! )[a-zA-Z0-9. _-]+(?<! )$`, match: func(s string) bool {
	s = strings.TrimSuffix(s, "\n")
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == ' ' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}}

// descriptionPattern is parameter_types.valid_description_regex,
// '^[<printable>]*$': Nova's printable characters, spaces included.
var descriptionPattern = kPattern{src: "^[<Nova's printable characters>]*$", repr: descriptionPatternRepr,
	match: func(s string) bool {
		for _, r := range strings.TrimSuffix(s, "\n") {
			if !inRanges(r, novaPrintableRanges) {
				return false
			}
		}
		return true
	}}

// booleanEnum is parameter_types.boolean's enum.
var booleanEnum = kEnum{true, "True", "TRUE", "true", "1", "ON", "On", "on", "YES", "Yes", "yes",
	false, "False", "FALSE", "false", "0", "OFF", "Off", "off", "NO", "No", "no"}

var flavorDescription = schema{kType{"string", "null"}, kMinLength(0), kMaxLength(65535), descriptionPattern}

// flavorCreate is flavor_manage.create, with withDescription
// create_v2_55.
func flavorCreate(withDescription bool) schema {
	props := kProperties{
		{"name", schema{kType{"string"}, kMinLength(1), kMaxLength(255), kFormatName{}}},
		{"id", schema{kType{"string", "number", "null"}, kMinLength(1), kMaxLength(255), flavorIDPattern}},
		{"ram", flavorParam(1)},
		{"vcpus", flavorParam(1)},
		{"disk", flavorParam(0)},
		{"OS-FLV-EXT-DATA:ephemeral", flavorParam(0)},
		{"swap", flavorParam(0)},
		{"rxtx_factor", schema{kType{"number", "string"}, rePattern(`^[0-9]+(\.[0-9]+)?$`, `^[0-9]+(\.[0-9]+)?\n?\z`),
			kMinimum{limit: 0, text: "0", exclusive: true}, kMaximum{limit: 3.40282e+38, text: "3.40282e+38"}}},
		{"os-flavor-access:is_public", schema{kType{"boolean", "string"}, booleanEnum}},
	}
	if withDescription {
		props = append(props, prop{"description", flavorDescription})
	}
	names := make([]string, len(props))
	for i, p := range props {
		names[i] = p.name
	}
	return wrapped("flavor", schema{kType{"object"}, props, kRequired{"name", "ram", "vcpus", "disk"}, kNoAdditional{props: names}})
}

// wrapped is {"type": "object", "properties": {key: inner}, "required":
// [key], "additionalProperties": false}.
func wrapped(key string, inner schema) schema {
	return schema{kType{"object"}, kProperties{{key, inner}}, kRequired{key}, kNoAdditional{props: []string{key}}}
}

var (
	schemaFlavorCreate     = flavorCreate(false)
	schemaFlavorCreate2_55 = flavorCreate(true)
	schemaFlavorUpdate2_55 = wrapped("flavor", schema{kType{"object"}, kProperties{{"description", flavorDescription}},
		kRequired{"description"}, kNoAdditional{props: []string{"description"}}})
)

// extraSpecKey is the metadata pattern flavors_extraspecs keeps.
var extraSpecKey = rePattern(`^[a-zA-Z0-9-_:. ]{1,255}$`, `^[a-zA-Z0-9\-_:. ]{1,255}\n?\z`)

// extraSpecs is flavors_extraspecs.metadata: strings or numbers under
// keys of the pattern; minMax adds update's minProperties/maxProperties 1.
func extraSpecs(minMax bool) schema {
	s := schema{kType{"object"},
		kPatternProperties{pattern: extraSpecKey, s: schema{kType{"string", "number"}, kMaxLength(255)}},
		kNoAdditional{pattern: &extraSpecKey}}
	if minMax {
		s = append(s, kMinProperties(1), kMaxProperties(1))
	}
	return s
}

var (
	schemaExtraSpecsCreate = wrapped("extra_specs", extraSpecs(false))
	schemaExtraSpecsUpdate = extraSpecs(true)
)

func tenantAction(action string) schema {
	return wrapped(action, schema{kType{"object"},
		kProperties{{"tenant", schema{kType{"string"}, kMinLength(1), kMaxLength(255)}}},
		kRequired{"tenant"}, kNoAdditional{props: []string{"tenant"}}})
}

var (
	schemaAddTenantAccess    = tenantAction("addTenantAccess")
	schemaRemoveTenantAccess = tenantAction("removeTenantAccess")
)

// flavorSortKeys is schemas/flavors.py's VALID_SORT_KEYS.
var flavorSortKeys = []any{"created_at", "description", "disabled", "ephemeral_gb", "flavorid", "id",
	"is_public", "memory_mb", "name", "root_gb", "rxtx_factor", "swap", "updated_at", "vcpu_weight", "vcpus"}

// flavorsQuery is schemas/flavors.py's index_query; strict is
// index_query_275, which refuses unknown parameters.
func flavorsQuery(strict bool) schema {
	str := schema{kType{"string"}}
	multi := func(s schema) schema { return schema{kType{"array"}, kItems{s}} }
	props := kProperties{
		{"limit", multi(schema{kType{"integer", "string"}, rePattern(`^[0-9]*$`, `^[0-9]*\n?\z`), kMinimum{limit: 0, text: "0"}, kMinLength(1)})},
		{"marker", multi(str)},
		{"is_public", multi(str)},
		{"minRam", multi(str)},
		{"minDisk", multi(str)},
		{"sort_key", multi(schema{kType{"string"}, kEnum(flavorSortKeys)})},
		{"sort_dir", multi(schema{kType{"string"}, kEnum{"asc", "desc"}})},
	}
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

var (
	schemaFlavorsQuery     = flavorsQuery(false)
	schemaFlavorsQuery2_75 = flavorsQuery(true)
)
