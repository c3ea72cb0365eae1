package compute

import (
	"strings"
	"testing"
)

// TestUserQuota: a user's own limit (os-quota-sets' user_id) holds for
// that user's servers only, in Nova's words; detail with the user_id
// shows what the user uses; the project's other users keep the
// project's room.
func TestUserQuota(t *testing.T) {
	r := newQuotaRig(t)
	if code, body := r.call(0, "PUT", "/os-quota-sets/race?user_id=u1", "admin:ops", `{"quota_set": {"instances": 1}}`); code != 200 {
		t.Fatalf("user quota: %d %s", code, body)
	}
	create := func(user string) (int, string) {
		return r.call(0, "POST", "/servers", user+":race",
			`{"server": {"name": "u", "flavorRef": "q2", "imageRef": "`+novaCirros+`", "networks": "none"}}`)
	}
	for _, c := range []struct {
		user string
		want int
		body string
	}{
		{"u1", 202, ""},
		{"u1", 403, `{"forbidden": {"code": 403, "message": "Quota exceeded for instances: Requested 1, but already used 1 of 1 instances"}}`},
		{"u2", 202, ""},
		{"u2", 202, ""},
	} {
		if code, body := create(c.user); code != c.want || (c.body != "" && body != c.body) {
			t.Errorf("create as %s: %d %s, want %d %s", c.user, code, body, c.want, c.body)
		}
	}
	code, body := r.call(0, "GET", "/os-quota-sets/race/detail?user_id=u1", "admin:ops", "")
	const want = `"instances": {"limit": 1, "in_use": 1, "reserved": 0}`
	if code != 200 || !strings.Contains(body, want) {
		t.Errorf("u1's detail: %d %s\nwant it to hold %s", code, body, want)
	}
	if used := r.inUse(); used["instances"] != 3 {
		t.Errorf("the project's in use %v, want 3 instances", used)
	}
	// A user's limit may not be set below what the user uses.
	code, body = r.call(0, "PUT", "/os-quota-sets/race?user_id=u2", "admin:ops", `{"quota_set": {"instances": 1}}`)
	if want := `{"badRequest": {"code": 400, "message": "Quota limit 1 for instances must be greater than or equal to already used and reserved 2."}}`; code != 400 || body != want {
		t.Errorf("u2's limit below its usage: %d %s\nwant 400 %s", code, body, want)
	}
}
