package httpapi

import "testing"

// TestRoutesHaveOneHandler: every row names exactly one handler (New
// panics otherwise), and no method of a path is served twice at one
// microversion.
func TestRoutesHaveOneHandler(t *testing.T) {
	s := &API{}
	rows := s.routes()
	for _, rt := range rows {
		if (rt.handle == nil) == (rt.handleProvider == nil) {
			t.Errorf("%s %s: set exactly one of handle and handleProvider", rt.method, rt.path)
		}
	}
	for mv := 0; mv <= maxMinor; mv++ {
		seen := map[string]bool{}
		for _, rt := range rows {
			if !rt.serves(mv) {
				continue
			}
			k := rt.method + " " + rt.path
			if seen[k] {
				t.Errorf("1.%d: %s served by two rows", mv, k)
			}
			seen[k] = true
		}
	}
}

// TestRouteCheckOrder pins the order of the checks a row makes, where
// Placement's decorators give one: each case fails two checks and wants
// the first one's answer.
func TestRouteCheckOrder(t *testing.T) {
	a := newAPI(t)
	const missing = "99999999-9999-9999-9999-999999999999"
	reader := []string{"X-Auth-Token: someone:proj", "X-Roles: member"}
	runErrCases(t, a, []errCase{
		{desc: "set aggregates: media type before version", method: "PUT", path: "/resource_providers/" + missing + "/aggregates",
			mv: "1.0", body: "[]", hdrs: []string{"Content-Type: text/plain"}, status: 415},
		{desc: "set aggregates: version before policy", method: "PUT", path: "/resource_providers/" + missing + "/aggregates",
			mv: "1.0", body: "[]", hdrs: reader, status: 404},
		{desc: "delete inventories below 1.5 is 405", method: "DELETE", path: "/resource_providers/" + missing + "/inventories",
			mv: "1.4", status: 405},
		{desc: "version before accept", method: "GET", path: "/traits", mv: "1.5", hdrs: []string{"Accept: text/plain"}, status: 404},
		{desc: "accept before policy", method: "GET", path: "/traits", mv: "1.6",
			hdrs: append([]string{"Accept: text/plain"}, reader...), status: 406},
		{desc: "media type before policy", method: "PUT", path: "/resource_providers/" + missing + "/traits", mv: "1.6",
			body: "{}", hdrs: append([]string{"Content-Type: text/plain"}, reader...), status: 415},
		{desc: "policy before provider", method: "PUT", path: "/resource_providers/" + missing + "/traits", mv: "1.6",
			body: map[string]any{}, hdrs: reader, status: 403},
		{desc: "provider before body", method: "PUT", path: "/resource_providers/" + missing + "/traits", mv: "1.6",
			body: "not json", status: 404, detail: "No resource provider with uuid " + missing + " found"},
		{desc: "rename class below 1.7 needs a JSON body", method: "PUT", path: "/resource_classes/CUSTOM_GOLD", mv: "1.6",
			hdrs: []string{"Content-Type: text/plain"}, body: "x", status: 415},
		{desc: "usages: another project's reader may not", method: "GET", path: "/usages?project_id=other", mv: "1.9",
			hdrs: []string{"X-Auth-Token: someone:proj", "X-Roles: reader"}, status: 403},
	})
	// From 1.7 the PUT creates the class and has no body to check.
	a.must(201, "PUT", "/resource_classes/CUSTOM_GOLD", "1.7", nil)
	a.must(200, "GET", "/usages?project_id=proj", "1.9", nil, "X-Auth-Token: someone:proj", "X-Roles: reader")
}
