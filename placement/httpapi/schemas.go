package httpapi

import (
	"strings"

	"github.com/berth-project/berth/internal/pycompat"
)

// The JSON schemas Placement validates bodies and query strings with, per
// microversion. Key order matters (jsonschema checks keywords and
// properties in written order, which decides which error a 400 reports),
// so each schema is written out as JSON, composed from the shared parts
// the way Placement derives one microversion's schema from the last.

const (
	patRC           = `^[A-Z0-9_]+$`
	patCustom       = `^CUSTOM_[A-Z0-9_]+$`
	patUUIDKey      = `^[0-9a-fA-F-]{36}$`
	patConsumerType = patRC
	patConsumerGet  = patRC + `|^all|^unknown$`
	patGroup        = `[1-9][0-9]*`
	patGroup133     = `[a-zA-Z0-9_-]{1,64}`
	jsonMaxInt      = `2147483647`
	jsonMaxFloat    = `3.40282e+38` // SQL single-precision FLOAT's max
)

// obj joins "key":value pairs into a JSON object.
func jObj(pairs ...string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i < len(pairs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + pairs[i] + `":` + pairs[i+1])
	}
	b.WriteByte('}')
	return b.String()
}

func jStr(s string) string { return `"` + strings.ReplaceAll(s, `\`, `\\`) + `"` }

func jList(items ...string) string { return "[" + strings.Join(items, ",") + "]" }

var (
	tInt     = jObj("type", jStr("integer"))
	tString  = jObj("type", jStr("string"))
	tStringL = jObj("type", jList(jStr("string")))
	tUUID    = jObj("type", jStr("string"), "format", jStr("uuid"))
	tID255   = jObj("type", jStr("string"), "minLength", "1", "maxLength", "255")
)

// Inventories.
func inventoryProps(extra ...string) string {
	capped := func(min string) string {
		return jObj("type", jStr("integer"), "maximum", jsonMaxInt, "minimum", min)
	}
	return jObj(append([]string{
		"resource_provider_generation", tInt,
		"total", capped("1"),
		"reserved", capped("0"),
		"min_unit", capped("1"),
		"max_unit", capped("1"),
		"step_size", capped("1"),
		"allocation_ratio", jObj("type", jStr("number"), "maximum", jsonMaxFloat),
	}, extra...)...)
}

func inventorySchema(required string, extra ...string) string {
	return jObj("type", jStr("object"), "properties", inventoryProps(extra...),
		"required", required, "additionalProperties", "false")
}

var (
	schemaInventory     = pycompat.MustSchema(inventorySchema(jList(jStr("total"), jStr("resource_provider_generation"))))
	schemaPostInventory = pycompat.MustSchema(inventorySchema(jList(jStr("total"), jStr("resource_class")),
		"resource_class", jObj("type", jStr("string"), "pattern", jStr(patRC))))
	schemaPutInventories = pycompat.MustSchema(putInventoriesSchema)
)

// putInventoriesSchema is PUT_INVENTORY_SCHEMA: the body of PUT
// /resource_providers/{u}/inventories, and each provider's part of a
// reshape.
var putInventoriesSchema = jObj("type", jStr("object"),
	"properties", jObj(
		"resource_provider_generation", tInt,
		"inventories", jObj("type", jStr("object"),
			"patternProperties", jObj(patRC, inventorySchema(jList(jStr("total")))))),
	"required", jList(jStr("resource_provider_generation"), jStr("inventories")),
	"additionalProperties", "false")

// Resource providers.
func providerSchema(props ...string) *pycompat.Schema {
	return pycompat.MustSchema(jObj("type", jStr("object"), "properties", jObj(props...),
		"required", jList(jStr("name")), "additionalProperties", "false"))
}

var (
	rpName          = jObj("type", jStr("string"), "maxLength", "200")
	rpParent        = jObj("anyOf", jList(tUUID, jObj("type", jStr("null"))))
	schemaPostRP    = providerSchema("name", rpName, "uuid", tUUID)
	schemaPutRP     = providerSchema("name", rpName)
	schemaPostRP114 = providerSchema("name", rpName, "uuid", tUUID, "parent_provider_uuid", rpParent)
	schemaPutRP114  = providerSchema("name", rpName, "parent_provider_uuid", rpParent)
)

func listProvidersSchema(mv int) *pycompat.Schema {
	props := []string{"name", tString, "uuid", tUUID}
	if mv >= 3 {
		props = append(props, "member_of", tString)
	}
	if mv >= 4 {
		props = append(props, "resources", tString)
	}
	if mv >= 14 {
		props = append(props, "in_tree", tUUID)
	}
	if mv >= 18 {
		props = append(props, "required", tString)
	}
	return pycompat.MustSchema(jObj("type", jStr("object"), "properties", jObj(props...), "additionalProperties", "false"))
}

var schemaListProviders = func() map[int]*pycompat.Schema {
	m := map[int]*pycompat.Schema{}
	for _, mv := range []int{0, 3, 4, 14, 18} {
		m[mv] = listProvidersSchema(mv)
	}
	return m
}()

// schemaForListProviders picks GET /resource_providers' query schema.
func schemaForListProviders(mv int) *pycompat.Schema {
	for _, v := range []int{18, 14, 4, 3} {
		if mv >= v {
			return schemaListProviders[v]
		}
	}
	return schemaListProviders[0]
}

// Allocations.
var (
	allocResources = jObj("type", jStr("object"), "minProperties", "1",
		"patternProperties", jObj(patRC, jObj("type", jStr("integer"), "minimum", "1")),
		"additionalProperties", "false")
	allocListItem = jObj("type", jStr("object"),
		"properties", jObj(
			"resource_provider", jObj("type", jStr("object"),
				"properties", jObj("uuid", tUUID),
				"additionalProperties", "false", "required", jList(jStr("uuid"))),
			"resources", allocResources),
		"required", jList(jStr("resource_provider"), jStr("resources")),
		"additionalProperties", "false")
	allocList = jObj("type", jStr("array"), "minItems", "1", "items", allocListItem)
)

func allocDict(minProps string) string {
	return jObj("type", jStr("object"), "minProperties", minProps,
		"patternProperties", jObj(patUUIDKey, jObj("type", jStr("object"),
			"properties", jObj("generation", tInt, "resources", allocResources),
			"required", jList(jStr("resources")), "additionalProperties", "false")),
		"additionalProperties", "false")
}

// allocationSchema is the PUT /allocations/{consumer} body at mv (and, per
// consumer, the POST /allocations body when post is set).
func allocationSchema(mv int, post bool) string {
	if mv < 12 && !post {
		props := []string{"allocations", allocList}
		req := []string{jStr("allocations")}
		if mv >= 8 {
			props = append(props, "project_id", tID255, "user_id", tID255)
			req = append(req, jStr("project_id"), jStr("user_id"))
		}
		return jObj("type", jStr("object"), "properties", jObj(props...),
			"required", jList(req...), "additionalProperties", "false")
	}
	minProps := "1"
	if mv >= 28 || post {
		minProps = "0"
	}
	props := []string{"allocations", allocDict(minProps), "project_id", tID255, "user_id", tID255}
	req := []string{jStr("allocations"), jStr("project_id"), jStr("user_id")}
	if mv >= 28 {
		props = append(props, "consumer_generation", jObj("type", jList(jStr("integer"), jStr("null")), "additionalProperties", "false"))
		req = append(req, jStr("consumer_generation"))
	}
	if mv >= 34 {
		props = append(props, "mappings", jObj("type", jStr("object"), "minProperties", "1",
			"patternProperties", jObj(patGroup133, jObj("type", jStr("array"), "minItems", "1", "items", tUUID))))
	}
	if mv >= 38 {
		props = append(props, "consumer_type", jObj("type", jStr("string"), "pattern", jStr(patConsumerType),
			"minLength", "1", "maxLength", "255"))
		req = append(req, jStr("consumer_type"))
	}
	return jObj("type", jStr("object"), "properties", jObj(props...),
		"additionalProperties", "false", "required", jList(req...))
}

// postAllocationsSchema is POST /allocations' body at mv; the reshaper
// uses it with minProps 0.
func postAllocationsSchema(mv int, minProps string) string {
	return jObj("type", jStr("object"), "minProperties", minProps, "additionalProperties", "false",
		"patternProperties", jObj(patUUIDKey, allocationSchema(mv, true)))
}

// The microversions at which an allocation schema changes.
var (
	putAllocationVersions  = []int{38, 34, 28, 12, 8, 0}
	postAllocationVersions = []int{38, 34, 28, 13}
	schemaPutAllocations   = map[int]*pycompat.Schema{}
	schemaPostAllocations  = map[int]*pycompat.Schema{}
)

func init() {
	for _, mv := range putAllocationVersions {
		schemaPutAllocations[mv] = pycompat.MustSchema(allocationSchema(mv, false))
	}
	for _, mv := range postAllocationVersions {
		schemaPostAllocations[mv] = pycompat.MustSchema(postAllocationsSchema(mv, "1"))
	}
}

func pickSchema(mv int, versions []int, m map[int]*pycompat.Schema) *pycompat.Schema {
	for _, v := range versions {
		if mv >= v {
			return m[v]
		}
	}
	return m[versions[len(versions)-1]]
}

// Allocation candidates.
func candidatesSchema(mv int) string {
	if mv < 25 {
		props := []string{"resources", tString}
		if mv >= 16 {
			props = append(props, "limit", jObj("type", jList(jStr("integer"), jStr("string")),
				"pattern", jStr(`^[1-9][0-9]*$`), "minimum", "1", "minLength", "1"))
		}
		if mv >= 17 {
			props = append(props, "required", tStringL)
		}
		if mv >= 21 {
			props = append(props, "member_of", tStringL)
		}
		return jObj("type", jStr("object"), "properties", jObj(props...),
			"required", jList(jStr("resources")), "additionalProperties", "false")
	}
	props := []string{
		"limit", jObj("type", jList(jStr("integer"), jStr("string")),
			"pattern", jStr(`^[1-9][0-9]*$`), "minimum", "1", "minLength", "1"),
		"group_policy", jObj("type", jStr("string"), "enum", jList(jStr("none"), jStr("isolate"))),
	}
	if mv >= 35 {
		props = append(props, "root_required", tStringL)
	}
	if mv >= 36 {
		props = append(props, "same_subtree", tStringL)
	}
	group := patGroup
	if mv >= 33 {
		group = patGroup133
	}
	kinds := []string{"resources", "required", "member_of"}
	if mv >= 31 {
		kinds = append(kinds, "in_tree")
	}
	var pats []string
	for _, k := range kinds {
		pats = append(pats, "^"+k+"("+group+")?$", tString)
	}
	return jObj("type", jStr("object"), "properties", jObj(props...),
		"additionalProperties", "false", "patternProperties", jObj(pats...))
}

var (
	candidatesVersions      = []int{36, 35, 33, 31, 25, 21, 17, 16, 10}
	schemaCandidates        = map[int]*pycompat.Schema{}
	schemaUsages            = pycompat.MustSchema(usagesSchema(false))
	schemaUsages138         = pycompat.MustSchema(usagesSchema(true))
	schemaCustomTrait       = pycompat.MustSchema(jObj("type", jStr("string"), "minLength", "1", "maxLength", "255", "pattern", jStr(patCustom)))
	schemaSetProviderTraits = pycompat.MustSchema(jObj("type", jStr("object"),
		"properties", jObj(
			"traits", jObj("type", jStr("array"), "items", jObj("type", jStr("string"), "minLength", "1", "maxLength", "255")),
			"resource_provider_generation", tInt),
		"required", jList(jStr("traits"), jStr("resource_provider_generation")),
		"additionalProperties", "false"))
	schemaListTraits = pycompat.MustSchema(jObj("type", jStr("object"),
		"properties", jObj("name", tString, "associated", tString),
		"additionalProperties", "false"))
	schemaResourceClass = pycompat.MustSchema(jObj("type", jStr("object"),
		"properties", jObj("name", jObj("type", jStr("string"), "pattern", jStr(patCustom), "maxLength", "255")),
		"required", jList(jStr("name")), "additionalProperties", "false"))
	jAggList            = jObj("type", jStr("array"), "items", tUUID, "uniqueItems", "true")
	schemaAggregates    = pycompat.MustSchema(jAggList)
	schemaAggregates119 = pycompat.MustSchema(jObj("type", jStr("object"),
		"properties", jObj("aggregates", jAggList, "resource_provider_generation", tInt),
		"required", jList(jStr("aggregates"), jStr("resource_provider_generation")),
		"additionalProperties", "false"))
)

func usagesSchema(v138 bool) string {
	props := []string{"project_id", tID255, "user_id", tID255}
	if v138 {
		props = append(props, "consumer_type", jObj("type", jStr("string"), "pattern", jStr(patConsumerGet),
			"minLength", "1", "maxLength", "255"))
	}
	return jObj("type", jStr("object"), "properties", jObj(props...),
		"required", jList(jStr("project_id")), "additionalProperties", "false")
}

func init() {
	for _, mv := range candidatesVersions {
		schemaCandidates[mv] = pycompat.MustSchema(candidatesSchema(mv))
	}
}

// Reshaper.

// reshaperSchema is POST_RESHAPER_SCHEMA (1.30) and its 1.34 and 1.38
// forms: per provider the PUT inventories body, at least one provider;
// per consumer the POST /allocations body of mv (1.28's until 1.34), where
// no consumer at all is allowed (minProperties 0 in place of POST's 1).
func reshaperSchema(mv int) string {
	return jObj("type", jStr("object"),
		"properties", jObj(
			"inventories", jObj("type", jStr("object"),
				"patternProperties", jObj(patUUIDKey, putInventoriesSchema),
				"minProperties", "1", "additionalProperties", "false"),
			"allocations", postAllocationsSchema(mv, "0")),
		"required", jList(jStr("inventories"), jStr("allocations")),
		"additionalProperties", "false")
}

var (
	reshaperVersions = []int{38, 34, 30}
	schemaReshaper   = func() map[int]*pycompat.Schema {
		m := map[int]*pycompat.Schema{}
		for _, mv := range reshaperVersions {
			m[mv] = pycompat.MustSchema(reshaperSchema(mv))
		}
		return m
	}()
)
