package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/gorilla/mux"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

// Every id or name a request gives that ends up in an etcd key is checked
// here, at the boundary, so the client is told what is wrong in the API's
// own error shape. (The key functions escape what slips through, so a bad
// string can never move a key elsewhere in the tree; that is the last
// guard, not the answer a client should get.)

// isUUID is Nova's 'format': 'uuid' (oslo's is_uuid_like): the forms
// google/uuid parses, none of which holds a "/" or a control character.
func isUUID(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil
}

// checkHints words servers.ValidateHints (the one check of the hints
// whose values reach keys: group, same_host and different_host must be
// canonical uuids) in Nova's schema wording, before the create reads
// anything. A hint shaped like a key path ("<uuid>/members/<uuid>") is a
// 400 here. One difference on purpose: Nova leaves a same_host given as a
// single string unchecked (its schema's "items" apply to a list only);
// Berth checks it as a list's items.
func checkHints(h etcdschema.SchedulerHints) string {
	var he *servers.HintError
	if errors.As(servers.ValidateHints(h), &he) {
		return fmt.Sprintf("Invalid input for field/attribute %s. Value: %s. %q is not a 'uuid'", he.Hint, he.Value, he.Value)
	}
	return ""
}

// checkHostName says what is wrong with a host name a request gives
// (field names it for the message), or "" when it can name a host: a key
// segment of at most 255 bytes, as Nova's hostname fields.
func checkHostName(field, host string) string {
	if host == "" {
		return ""
	}
	if err := etcdschema.CheckSegment(host); err != nil || len(host) > 255 {
		return fmt.Sprintf("Invalid input for field/attribute %s. Value: %q is not a host name (1-255 characters, no '/' or control character).", field, host)
	}
	return ""
}

// checkDisplayName says what is wrong with a name that is reserved under
// a key (an aggregate's), or "": Nova's 'format': 'name' takes printable
// characters, "/" among them (the key escapes it: etcdschema), but no
// control character.
func checkDisplayName(field, name string) string {
	if strings.ContainsFunc(name, unicode.IsControl) || !utf8.ValidString(name) {
		return fmt.Sprintf("Invalid input for field/attribute %s. Value: %q holds a control character or invalid UTF-8.", field, name)
	}
	return ""
}

// checkPathSegments answers 404 for a path whose {id} is not a UUID (every
// /v1 id is one: servers, server groups, aggregates) or whose {host} or
// {name} cannot be a key segment: no such resource can exist, and the
// handlers need not each remember to check.
func checkPathSegments(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vars := mux.Vars(r)
		if id, ok := vars["id"]; ok && !isUUID(id) {
			writeError(w, http.StatusNotFound, fmt.Sprintf("The resource could not be found: %q is not a UUID.", id))
			return
		}
		for _, v := range []string{"host", "name"} {
			if s, ok := vars[v]; ok && etcdschema.CheckSegment(s) != nil {
				writeError(w, http.StatusNotFound, fmt.Sprintf("The resource could not be found: %q is not a valid %s.", s, v))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
