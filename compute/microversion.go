package compute

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// The microversions Berth serves: those of Nova 26 (Zed),
// nova/api/openstack/api_version_request.py.
const (
	minMinor = 1
	maxMinor = 93
)

// version is a requested API version, 2.minor.
type version struct{ minor int }

// atLeast reports whether v is 2.minor or later (api_version_request.
// is_supported with a min_version).
func (v version) atLeast(minor int) bool { return v.minor >= minor }

func (v version) String() string {
	if v.minor >= minMinor && v.minor <= maxMinor {
		return servedVersions[v.minor].plain
	}
	return "2." + strconv.Itoa(v.minor)
}

// versionStrings are a served version's spellings, made once (every
// answer names its version in two headers): "2.74" and "compute 2.74".
type versionStrings struct{ plain, compute string }

// servedVersions are the versions' spellings by minor; servedMinors
// reads them back. A request naming one of them exactly asks for it:
// versionRE matches it and it is in range.
var servedVersions, servedMinors = func() (by [maxMinor + 1]versionStrings, minors map[string]int) {
	minors = make(map[string]int, maxMinor)
	for m := minMinor; m <= maxMinor; m++ {
		plain := "2." + strconv.Itoa(m)
		by[m] = versionStrings{plain: plain, compute: "compute " + plain}
		minors[plain] = m
	}
	return by, minors
}()

// The microversion headers as net/http keeps them (canonical keys: a key
// spelled otherwise is canonicalized, a new string, at every use).
const (
	headerAPIVersion     = "Openstack-Api-Version"        // OpenStack-API-Version
	headerNovaAPIVersion = "X-Openstack-Nova-Api-Version" // X-OpenStack-Nova-API-Version
)

// versionRE is APIVersionRequest's format: no leading zeros, minor 0
// allowed. Python's "$" also matches before a final newline, which an
// HTTP header cannot carry.
var versionRE = regexp.MustCompile(`^([1-9][0-9]*)\.([1-9][0-9]*|0)$`)

// negotiate is Request.set_api_version_request: the version the request
// asks for, or the fault Nova answers: 400 for a malformed version (no
// version is set, so no version headers), 406 for one outside 2.1 to
// 2.93 (with that version in the headers).
func negotiate(h http.Header) (version, *fault) {
	raw, ok := requestedVersion(h)
	switch {
	case !ok:
		return version{minor: minMinor}, nil // DEFAULT_API_VERSION
	case raw == "latest":
		return version{minor: maxMinor}, nil
	}
	if minor, ok := servedMinors[raw]; ok {
		return version{minor: minor}, nil
	}
	m := versionRE.FindStringSubmatch(raw)
	if m == nil {
		return version{}, &fault{status: http.StatusBadRequest,
			message: "API Version String " + raw + " is of invalid format. Must be of format MajorNum.MinorNum."}
	}
	// Without leading zeros the digits are the version's get_string();
	// more than three of them are out of range however they read.
	minor, err := strconv.Atoi(m[2])
	if m[1] != "2" || len(m[2]) > 3 || err != nil || minor < minMinor || minor > maxMinor {
		// Nova sets the request's version before it checks the range, so
		// this fault carries the version asked for in its headers.
		return version{}, &fault{status: http.StatusNotAcceptable, requested: m[1] + "." + m[2],
			message: "Version " + m[1] + "." + m[2] + " is not supported by the API. Minimum is 2.1 and maximum is 2.93."}
	}
	return version{minor: minor}, nil
}

// requestedVersion is microversion_parse.get_version(headers,
// service_type='compute', legacy_headers=['X-OpenStack-Nova-API-Version']):
// the last "compute X" entry of OpenStack-API-Version (repeated headers
// folded with ","), else the last entry of the legacy header. ok is false
// when neither says anything; a legacy header present but empty is an
// (invalid) empty version, as in Nova.
func requestedVersion(h http.Header) (raw string, ok bool) {
	if vals := h.Values(headerAPIVersion); len(vals) > 0 {
		parts := vals // one header of one entry, as clients send it
		if len(vals) > 1 || strings.Contains(vals[0], ",") {
			parts = strings.Split(strings.Join(vals, ","), ",")
		}
		for i := len(parts) - 1; i >= 0; i-- {
			service, ver, found := cutSpace(strings.TrimSpace(parts[i]))
			if found && strings.EqualFold(service, "compute") {
				return strings.TrimSpace(ver), true
			}
		}
	}
	if vals := h.Values(headerNovaAPIVersion); len(vals) > 0 {
		parts := strings.Split(strings.Join(vals, ","), ",")
		return strings.TrimSpace(parts[len(parts)-1]), true
	}
	return "", false
}

// cutSpace is str.split(None, 1) into exactly two parts.
func cutSpace(s string) (first, rest string, ok bool) {
	i := strings.IndexAny(s, " \t\v\f\r\n")
	if i < 0 {
		return "", "", false
	}
	return s[:i], strings.TrimLeft(s[i:], " \t\v\f\r\n"), true
}

// setVersionHeaders are the headers Nova adds to every answer of a
// request whose version was set (wsgi.Resource and Fault).
func setVersionHeaders(h http.Header, v string) {
	putVersionHeaders(h, v, "compute "+v)
}

// setServedVersionHeaders is setVersionHeaders for a served version, with
// the strings made once.
func setServedVersionHeaders(h http.Header, v version) {
	if v.minor < minMinor || v.minor > maxMinor {
		setVersionHeaders(h, v.String())
		return
	}
	s := &servedVersions[v.minor]
	putVersionHeaders(h, s.plain, s.compute)
}

func putVersionHeaders(h http.Header, plain, compute string) {
	h[headerAPIVersion] = []string{compute}
	h[headerNovaAPIVersion] = []string{plain}
	h["Vary"] = append(h["Vary"], "OpenStack-API-Version", "X-OpenStack-Nova-API-Version")
}
