package images

import (
	"net/http"
	"strings"

	"github.com/google/uuid"
)

func newUUID() string { return uuid.NewString() }

// glanceVersions are the versions Glance 25 (Zed) lists with no image
// cache and no multiple stores, newest first; the first is CURRENT.
var glanceVersions = []string{"2.15", "2.9", "2.7", "2.6", "2.5", "2.4", "2.3", "2.2", "2.1", "2.0"}

// writeVersions is glance.api.versions.Controller.index: every version's
// link is the application URL's /v2/.
func (a *API) writeVersions(w http.ResponseWriter, r *http.Request, status int) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	href := strings.TrimRight(scheme+"://"+r.Host, "/") + "/v2/"
	vs := make([]any, len(glanceVersions))
	for i, v := range glanceVersions {
		st := "SUPPORTED"
		if i == 0 {
			st = "CURRENT"
		}
		vs[i] = obj{{"id", "v" + v}, {"status", st}, {"links", []any{obj{{"rel", "self"}, {"href", href}}}}}
	}
	writeJSON(w, status, obj{{"versions", vs}})
}
