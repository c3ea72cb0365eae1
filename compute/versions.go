package compute

import "strings"

// The version documents of nova/api/openstack/compute/versions.py and
// views/versions.py, with links built from the request's host as Nova
// builds them from request.application_url (no compute_link_prefix).

// versionInfo is one entry of versions.VERSIONS, in its member order.
func versionInfo(id string) obj {
	if id == "v2.0" {
		return obj{{"id", "v2.0"}, {"status", "SUPPORTED"}, {"version", ""}, {"min_version", ""},
			{"updated", "2011-01-21T11:33:21Z"}, {"links", []obj{describedBy()}},
			{"media-types", []obj{{{"base", "application/json"}, {"type", "application/vnd.openstack.compute+json;version=2"}}}}}
	}
	return obj{{"id", "v2.1"}, {"status", "CURRENT"}, {"version", "2.93"}, {"min_version", "2.1"},
		{"updated", "2013-07-23T11:33:21Z"}, {"links", []obj{describedBy()}},
		{"media-types", []obj{{{"base", "application/json"}, {"type", "application/vnd.openstack.compute+json;version=2.1"}}}}}
}

func describedBy() obj {
	return obj{{"rel", "describedby"}, {"type", "text/html"}, {"href", "http://docs.openstack.org/"}}
}

// versionHref is ViewBuilder.generate_href: the v2 or v2.1 root, then
// path (a trailing "/" when there is none).
func versionHref(base, id, path string) string {
	num := "v2"
	if strings.HasPrefix(id, "v2.1") {
		num = "v2.1"
	}
	return urlJoin(base, num, path)
}

// urlJoin is nova.api.openstack.common.url_join.
func urlJoin(parts ...string) string {
	var buf [8]string // on the stack: a server view joins several links
	clean := buf[:0]
	for _, p := range parts {
		if p != "" {
			clean = append(clean, strings.Trim(p, "/"))
		}
	}
	if parts[len(parts)-1] == "" {
		clean = append(clean, "")
	}
	return strings.Join(clean, "/")
}

// versionsIndex is GET /: build_versions.
func versionsIndex(base string) obj {
	var out []obj
	for _, id := range []string{"v2.0", "v2.1"} {
		info := versionInfo(id)
		row := obj{}
		for _, k := range []string{"id", "status", "version", "min_version", "updated"} {
			v, _ := info.get(k)
			row = append(row, member{k, v})
		}
		row = append(row, member{"links", []obj{{{"rel", "self"}, {"href", versionHref(base, id, "")}}}})
		out = append(out, row)
	}
	return obj{{"versions", out}}
}

// versionsChoices is any other path the root app gets: build_choices,
// answered 300 Multiple Choices.
func versionsChoices(base, path string) obj {
	var out []obj
	for _, id := range []string{"v2.0", "v2.1"} {
		info := versionInfo(id)
		status, _ := info.get("status")
		media, _ := info.get("media-types")
		out = append(out, obj{{"id", id}, {"status", status},
			{"links", []obj{{{"rel", "self"}, {"href", versionHref(base, id, path)}}}}, {"media-types", media}})
	}
	return obj{{"choices", out}}
}

// versionV21 is GET /v2.1 and /v2.1/: build_version of v2.1, a self link
// first.
func versionV21(base string) obj {
	info := versionInfo("v2.1")
	for i := range info {
		if info[i].k == "links" {
			info[i].v = []obj{{{"rel", "self"}, {"href", strings.TrimRight(base, "/") + "/"}}, describedBy()}
		}
	}
	return obj{{"version", info}}
}
