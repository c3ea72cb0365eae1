package compute

import (
	"encoding/base64"
	"net/netip"
	"strings"
	"sync"

	"github.com/berth-project/berth/internal/pycompat"
)

// The create schemas of schemas/servers.py (create, create_v219 ...
// create_v290) and the parameter_types they use, keyword for keyword for
// the members Berth reads. The members Berth accepts and ignores
// (personality, block_device_mapping, the members of a
// block_device_mapping_v2 item, user_data's content) are checked for
// their JSON type only: see the table in doc.go.

// isUUIDLike is oslo's uuidutils.is_uuid_like: any case, hyphens
// anywhere, braces and a urn:uuid: prefix allowed.
func isUUIDLike(s string) bool {
	if like, plain := plainUUIDLike(s); plain {
		return like
	}
	v := strings.ToLower(strings.Trim(strings.NewReplacer("urn:", "", "uuid:", "").Replace(s), "{}"))
	v = strings.ReplaceAll(v, "-", "")
	if len(v) != 32 {
		return false
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// plainUUIDLike is isUUIDLike without allocating for a string with no
// braces and no colon (every uuid a client sends, hyphenated or not):
// only hyphens are then removed, and 32 hex digits must remain. plain is
// false for any other string, which isUUIDLike reads the long way.
func plainUUIDLike(s string) (like, plain bool) {
	digits, hex := 0, true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '-':
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
			digits++
		case c == ':' || c == '{' || c == '}' || c >= 0x80:
			return false, false // the replacer and the case fold decide
		default:
			hex = false // not hex in any case; a colon further on may still remove it
		}
	}
	return hex && digits == 32, true
}

// isCanonicalUUID says whether s is already as canonical spells it:
// lowercase, 8-4-4-4-12.
func isCanonicalUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// kFormatString is the remaining formats of Nova's FormatChecker
// (uuid, ipv4, ipv6, base64), for strings; other types pass, as
// jsonschema's checkers let them.
type kFormatString string

func (k kFormatString) check(inst any, path []any) *vErr {
	s, ok := inst.(string)
	if !ok {
		if k == "uuid" {
			return failRepr(inst, path, " is not a 'uuid'")
		}
		return nil
	}
	valid := true
	switch k {
	case "uuid":
		valid = isUUIDLike(s)
	case "ipv4":
		a, err := netip.ParseAddr(s)
		valid = err == nil && a.Is4()
	case "ipv6":
		a, err := netip.ParseAddr(s)
		valid = err == nil && a.Is6()
	case "base64":
		_, err := base64.StdEncoding.DecodeString(s)
		valid = err == nil
	}
	if !valid {
		return failRepr(inst, path, " is not a "+pycompat.StrRepr(string(k)))
	}
	return nil
}

var (
	uuidString     = schema{kType{"string"}, kFormatString("uuid")}
	nameParam      = schema{kType{"string"}, kMinLength(1), kMaxLength(255), kFormatName{}}
	ipAddress      = schema{kType{"string"}, kOneOf{{kFormatString("ipv4")}, {kFormatString("ipv6")}}}
	metadataKey    = rePattern(`^[a-zA-Z0-9-_:. ]{1,255}$`, `^[a-zA-Z0-9\-_:. ]{1,255}\n?\z`)
	serverMetadata = schema{kType{"object"}, kPatternProperties{pattern: metadataKey, s: schema{kType{"string"}, kMaxLength(255)}},
		kNoAdditional{pattern: &metadataKey}}
	// serverDescription is parameter_types.description (255, unlike a
	// flavor's 65535).
	serverDescription = schema{kType{"string", "null"}, kMinLength(0), kMaxLength(255), descriptionPattern}
	tagParam          = schema{kType{"string"}, kMinLength(1), kMaxLength(60), rePattern(`^[^,/]*$`, `^[^,/]*\n?\z`)}
	hostnameParam     = schema{kType{"string"}, kMinLength(2), kMaxLength(63),
		rePattern(`^[a-zA-Z0-9]+[a-zA-Z0-9-]*[a-zA-Z0-9]+$`, `^[a-zA-Z0-9]+[a-zA-Z0-9-]*[a-zA-Z0-9]+\n?\z`)}
)

func noAdditional(props kProperties) kNoAdditional {
	names := make([]string, len(props))
	for i, p := range props {
		names[i] = p.name
	}
	return kNoAdditional{props: names}
}

// schedulerHints is _hints (additionalProperties true).
var schedulerHints = schema{kType{"object"}, kProperties{
	{"group", uuidString},
	{"different_host", schema{kOneOf{uuidString, {kType{"array"}, kItems{uuidString}}}}},
	{"same_host", schema{kType{"string", "array"}, kItems{uuidString}}},
	{"query", schema{kType{"string", "object"}}},
	{"target_cell", nameParam},
	{"different_cell", schema{kType{"string", "array"}, kItems{schema{kType{"string"}}}}},
	{"build_near_host_ip", ipAddress},
	{"cidr", schema{kType{"string"}, rePattern(`^/[0-9a-f.:]+$`, `^/[0-9a-f.:]+\n?\z`)}},
}}

// networkItem is one member of a networks list; uuidFormat from 2.37,
// tag in 2.32 and from 2.42 (see create_v233's note).
func networkItem(uuidFormat, tag bool) schema {
	port := schema{kOneOf{uuidString, {kType{"null"}}}}
	netUUID := schema{kType{"string"}}
	if uuidFormat {
		netUUID = uuidString
	}
	props := kProperties{{"fixed_ip", ipAddress}, {"port", port}, {"uuid", netUUID}}
	if tag {
		props = append(props, prop{"tag", tagParam})
	}
	return schema{kType{"object"}, props, noAdditional(props)}
}

// serverCreateSchemas are the create schemas of 2.0 to 2.93, built once.
var serverCreateSchemas = sync.OnceValue(func() []schema {
	out := make([]schema, maxMinor+1)
	for m := range out {
		out[m] = buildServerCreate(version{m})
	}
	return out
})

// serverCreate is the create schema of version v.
func serverCreate(v version) schema {
	if all := serverCreateSchemas(); v.minor >= 0 && v.minor < len(all) {
		return all[v.minor]
	}
	return buildServerCreate(v)
}

func buildServerCreate(v version) schema {
	tagInNetworks := v.minor == 32 || v.atLeast(42)
	var networks schema
	if v.atLeast(37) {
		networks = schema{kOneOf{{kType{"array"}, kItems{networkItem(true, tagInNetworks)}},
			{kType{"string"}, kEnum{"none", "auto"}}}}
	} else {
		networks = schema{kType{"array"}, kItems{networkItem(false, tagInNetworks)}}
	}
	secGroup := kProperties{{"name", nameParam}}
	props := kProperties{
		{"name", nameParam},
		{"imageRef", schema{kOneOf{uuidString, {kType{"string"}, kMaxLength(0)}}}},
		{"flavorRef", schema{kType{"string", "integer"}, kMinLength(1)}},
		{"adminPass", schema{kType{"string"}}},
		{"metadata", serverMetadata},
		{"networks", networks},
		{"OS-DCF:diskConfig", schema{kType{"string"}, kEnum{"AUTO", "MANUAL"}}},
		{"accessIPv4", schema{kType{"string"}, kFormatString("ipv4")}},
		{"accessIPv6", schema{kType{"string"}, kFormatString("ipv6")}},
	}
	if !v.atLeast(57) {
		props = append(props, prop{"personality", schema{kType{"array"}}})
	}
	props = append(props,
		prop{"availability_zone", nameParam},
		prop{"block_device_mapping", schema{kType{"array"}, kItems{schema{kType{"object"}}}}},
		prop{"block_device_mapping_v2", schema{kType{"array"}, kItems{schema{kType{"object"}}}}},
		prop{"config_drive", booleanParam},
		prop{"key_name", nameParam},
		prop{"min_count", positiveInteger},
		prop{"max_count", positiveInteger},
		prop{"return_reservation_id", booleanParam},
		prop{"security_groups", schema{kType{"array"}, kItems{schema{kType{"object"}, secGroup, noAdditional(secGroup)}}}},
		prop{"user_data", schema{kType{"string"}, kFormatString("base64"), kMaxLength(65535)}},
	)
	if v.atLeast(mvDescription) {
		props = append(props, prop{"description", serverDescription})
	}
	if v.atLeast(52) {
		props = append(props, prop{"tags", schema{kType{"array"}, kItems{tagParam}, kMaxItems(50)}})
	}
	if v.atLeast(mvTrustedCerts) {
		props = append(props, prop{"trusted_image_certificates", schema{kType{"array", "null"}, kMinItems(1), kMaxItems(50),
			kItems{schema{kType{"string"}, kMinLength(1)}}}})
	}
	if v.atLeast(74) {
		props = append(props, prop{"host", fqdn}, prop{"hypervisor_hostname", fqdn})
	}
	if v.atLeast(mvHostnameForNonAdmin) {
		props = append(props, prop{"hostname", hostnameParam})
	}
	required := kRequired{"name", "flavorRef"}
	if v.atLeast(37) {
		required = append(required, "networks")
	}
	server := schema{kType{"object"}, props, required, noAdditional(props)}
	top := kProperties{{"server", server}, {"os:scheduler_hints", schedulerHints}, {"OS-SCH-HNT:scheduler_hints", schedulerHints}}
	return schema{kType{"object"}, top, kRequired{"server"}, noAdditional(top)}
}
