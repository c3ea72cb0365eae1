package compute

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/berth-project/berth/internal/pycompat"
)

// The list query of GET /servers and /servers/detail:
// schemas/servers.py's query_params_v21 ... v275, keyword for keyword.

// kFormat is "format": "regex" or "date-time", with Nova's checkers
// (validators.py): a regex must compile (and not be empty), a date-time
// must parse as timeutils.parse_isotime parses.
type kFormat string

func (k kFormat) check(inst any, path []any) *vErr {
	s, ok := inst.(string)
	if !ok {
		if k == "regex" {
			return failRepr(inst, path, " is not a "+pycompat.StrRepr(string(k)))
		}
		return nil // jsonschema's date-time checker raises on non-strings only for strings
	}
	valid := true
	switch k {
	case "regex":
		_, err := compilePyRegex(s)
		valid = s != "" && err == nil
	case "date-time":
		_, valid = parseISOTime(s)
	}
	if !valid {
		return failRepr(inst, path, " is not a "+pycompat.StrRepr(string(k)))
	}
	return nil
}

// compilePyRegex compiles a Python regular expression as Go's RE2
// reads it. The two agree on what Nova's filters are used with (names,
// anchors, classes, alternations); Python's look-arounds and
// backreferences, which RE2 lacks, are refused here where Python
// accepts them: a documented difference.
func compilePyRegex(s string) (*regexp.Regexp, error) { return regexp.Compile(s) }

// serverSortKeys is VALID_SORT_KEYS; ignoredSortKeys is
// SERVER_LIST_IGNORE_SORT_KEY (accepted, then dropped).
var (
	serverSortKeys = []string{"access_ip_v4", "access_ip_v6", "auto_disk_config",
		"availability_zone", "config_drive", "created_at", "display_description", "display_name", "host",
		"hostname", "image_ref", "instance_type_id", "kernel_id", "key_name", "launch_index", "launched_at",
		"locked_by", "node", "power_state", "progress", "project_id", "ramdisk_id", "root_device_name",
		"task_state", "terminated_at", "updated_at", "user_id", "uuid", "vm_state"}
	ignoredSortKeys = []string{"architecture", "cell_name", "cleaned", "default_ephemeral_device",
		"default_swap_device", "deleted", "deleted_at", "disable_terminate", "ephemeral_gb",
		"ephemeral_key_uuid", "id", "key_data", "launched_on", "locked", "memory_mb", "os_type",
		"reservation_id", "root_gb", "shutdown_terminate", "user_data", "vcpus", "vm_mode"}
)

// ignoredSortKeysAt is the ignore list of a version: "locked" is a real
// sort key from 2.73, and from 2.75 nothing is ignored (the enum refuses).
func ignoredSortKeysAt(v version) []string {
	if !v.atLeast(mvLockedReason) {
		return ignoredSortKeys
	}
	var out []string
	for _, k := range ignoredSortKeys {
		if k != "locked" {
			out = append(out, k)
		}
	}
	return out
}

func sortKeyEnum(v version) kEnum {
	var e kEnum
	if v.atLeast(mvLockedReason) {
		e = append(e, "locked")
	}
	for _, k := range serverSortKeys {
		e = append(e, k)
	}
	if !v.atLeast(mvStrictServerQuery) {
		for _, k := range ignoredSortKeysAt(v) {
			e = append(e, k)
		}
	}
	return e
}

// joinedTableParams are JOINED_TABLE_QUERY_PARAMS_SERVERS: accepted by
// the schema so that the handler can refuse them with a 400.
var joinedTableParams = []string{"block_device_mapping", "services", "metadata", "system_metadata",
	"info_cache", "security_groups", "pci_devices"}

// serversQuery is the query schema of version v.
func serversQuery(v version) (schema, []string) {
	multi := func(s schema) schema { return schema{kType{"array"}, kItems{s}} }
	plain := multi(schema{kType{"string"}})
	regex := multi(schema{kType{"string"}, kFormat("regex")})
	dateTime := multi(schema{kType{"string"}, kFormat("date-time")})
	props := kProperties{
		{"user_id", plain}, {"project_id", plain}, {"tenant_id", plain}, {"launch_index", plain},
		{"image_ref", plain}, {"image", plain}, {"kernel_id", regex}, {"ramdisk_id", regex},
		{"hostname", regex}, {"key_name", regex}, {"power_state", regex}, {"vm_state", plain},
		{"task_state", plain}, {"host", plain}, {"node", regex}, {"flavor", regex},
		{"reservation_id", regex}, {"launched_at", regex}, {"terminated_at", regex},
		{"availability_zone", regex}, {"name", regex}, {"display_name", regex}, {"description", regex},
		{"display_description", regex}, {"locked_by", regex}, {"uuid", plain},
		{"root_device_name", regex}, {"config_drive", regex}, {"access_ip_v4", regex},
		{"access_ip_v6", regex}, {"auto_disk_config", regex}, {"progress", regex},
		{"sort_key", multi(schema{kType{"string"}, sortKeyEnum(v)})}, {"sort_dir", plain},
		{"all_tenants", plain}, {"soft_deleted", plain}, {"deleted", plain}, {"status", plain},
		{"changes-since", dateTime}, {"ip", regex}, {"ip6", regex}, {"created_at", regex},
	}
	for _, p := range joinedTableParams {
		props = append(props, prop{p, plain})
	}
	props = append(props,
		prop{"limit", multi(schema{kType{"integer", "string"}, rePattern(`^[0-9]*$`, `^[0-9]*\n?\z`), kMinimum{limit: 0, text: "0"}, kMinLength(1)})},
		prop{"marker", plain})
	if v.atLeast(mvTags) {
		props = append(props, prop{"tags", regex}, prop{"tags-any", regex}, prop{"not-tags", regex}, prop{"not-tags-any", regex})
	}
	if v.atLeast(mvChangesBefore) {
		props = append(props, prop{"changes-before", dateTime})
	}
	if v.atLeast(mvLockedReason) {
		props = append(props, prop{"locked", plain})
	}
	names := make([]string, len(props))
	for i, p := range props {
		names[i] = p.name
	}
	underscore := rePattern(`^_`, `^_`)
	s := schema{kType{"object"}, props, kPatternProperties{pattern: underscore, s: plain}}
	if v.atLeast(mvStrictServerQuery) {
		s = append(s, kNoAdditional{props: names, pattern: &underscore})
	}
	return s, names
}

// isoTimeRE is iso8601.parse_date's grammar (what oslo's parse_isotime
// calls): a date, optionally a time, optionally a zone.
var isoTimeRE = regexp.MustCompile(`^([0-9]{4})(?:-?([0-9]{1,2})(?:-?([0-9]{1,2})` +
	`(?:[T ]([0-9]{2})(?::?([0-9]{2})(?::?([0-9]{2})(?:[.,]([0-9]+))?)?)?` +
	`[ ]?(Z|[+-][0-9]{2}(?::?[0-9]{2})?)?)?)?)?$`)

// parseISOTime is timeutils.parse_isotime: UTC when no zone is given.
func parseISOTime(s string) (time.Time, bool) {
	m := isoTimeRE.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, false
	}
	num := func(s string, def int) int {
		if s == "" {
			return def
		}
		n, _ := strconv.Atoi(s)
		return n
	}
	year, month, day := num(m[1], 1), num(m[2], 1), num(m[3], 1)
	hour, minute, sec := num(m[4], 0), num(m[5], 0), num(m[6], 0)
	nsec := 0
	if m[7] != "" {
		frac := (m[7] + "000000000")[:9]
		nsec, _ = strconv.Atoi(frac)
	}
	if month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	loc := time.UTC
	if z := m[8]; z != "" && z != "Z" {
		sign := 1
		if z[0] == '-' {
			sign = -1
		}
		digits := strings.ReplaceAll(z[1:], ":", "")
		h, _ := strconv.Atoi(digits[:2])
		mm := 0
		if len(digits) == 4 {
			mm, _ = strconv.Atoi(digits[2:])
		}
		loc = time.FixedZone(z, sign*(h*3600+mm*60))
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, loc)
	if t.Day() != day {
		return time.Time{}, false // 2021-02-30: Python's datetime refuses it
	}
	return t.UTC(), true
}
