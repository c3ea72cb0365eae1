package images

import (
	"errors"
	"mime"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// patchTypes are the JSON-patch media types Glance takes, with the
// JSON-schema draft each spells its operations in.
var patchTypes = map[string]int{
	"application/openstack-images-v2.0-json-patch": 4,
	"application/openstack-images-v2.1-json-patch": 10,
}

// patchOps are Glance's supported operations, in its order.
var patchOps = []string{"add", "remove", "replace"}

// mutableAttrs are the image attributes a PATCH may set (Glance's
// hasattr(image, name) for those not read-only); any other name is an
// additional property.
var mutableAttrs = []string{"name", "visibility", "protected", "os_hidden", "owner", "disk_format",
	"container_format", "min_ram", "min_disk", "tags"}

// change is one parsed operation.
type change struct {
	op, path string
	value    any
}

// update is PATCH /v2/images/{id}: the deserializer's checks (415, 400,
// 403 for read-only or reserved names, the value against the schema),
// then the image (404), the modify_image policy (admin, as add_image),
// and the operations in order, committed together.
func (a *API) update(q *request, id string) *apiError {
	mt, _, _ := mime.ParseMediaType(q.r.Header.Get("Content-Type"))
	draft, ok := patchTypes[mt]
	if !ok {
		q.w.Header().Set("Accept-Patch", "application/openstack-images-v2.0-json-patch, application/openstack-images-v2.1-json-patch")
		return &apiError{status: http.StatusUnsupportedMediaType,
			explanation: "The request media type " + q.r.Header.Get("Content-Type") + " is not supported by this server."}
	}
	v, _, e := readBody(q.r)
	if e != nil {
		return e
	}
	raw, ok := v.([]any)
	if !ok {
		return badRequest("Request body must be a JSON array of operation objects.")
	}
	changes := make([]change, 0, len(raw))
	for _, rc := range raw {
		c, e := parseChange(rc, draft)
		if e != nil {
			return e
		}
		changes = append(changes, c)
	}
	if _, e := a.visible(q, id); e != nil {
		return e
	}
	if !q.who.admin {
		return notAuthorized("modify_image")
	}
	var refused *apiError
	img, err := a.store.Update(q.r.Context(), id, func(img *Image) error {
		for _, c := range changes {
			if refused = apply(img, c, draft); refused != nil {
				return refused
			}
		}
		if refused = checkQuotas(img); refused != nil {
			return refused
		}
		img.UpdatedAt = a.now().UTC()
		return nil
	})
	switch {
	case refused != nil:
		return refused
	case errors.Is(err, ErrNotFound):
		return imageNotFound(id)
	case errors.Is(err, ErrTooLarge):
		return tooLarge()
	case err != nil:
		return a.storeError(q, err)
	}
	a.log.Info("image updated", "image", id, "name", nameOf(img), "visibility", img.Visibility,
		"command", FormatCommand(img.Command), "protected", img.Protected)
	writeJSON(q.w, http.StatusOK, view(img))
	return nil
}

var adjacentSlashes = regexp.MustCompile(`/\s*?/`)
var badTilde = regexp.MustCompile(`~[^01]`)

// parseChange is _parse_json_schema_change with _validate_path,
// _get_change_value and _validate_change.
func parseChange(rc any, draft int) (change, *apiError) {
	m, ok := rc.(map[string]any)
	if !ok {
		return change{}, badRequest("Operations must be JSON objects.")
	}
	var c change
	if draft == 10 {
		op, ok := m["op"].(string)
		if _, has := m["op"]; !has {
			return c, badRequest("Unable to find `op` in JSON Schema change. It must be one of the following: add, remove, replace.")
		}
		if !ok || !slices.Contains(patchOps, op) {
			return c, badRequest("Invalid operation: `" + stringOf(m["op"]) + "`. It must be one of the following: add, remove, replace.")
		}
		c.op = op
		p, ok := m["path"].(string)
		if !ok {
			return c, badRequest("Unable to find 'path' in JSON Schema change")
		}
		c.path = p
	} else {
		for _, op := range patchOps {
			if _, ok := m[op]; ok {
				if c.op != "" {
					return c, badRequest(`Operation objects must contain only one member named "add", "remove", or "replace".`)
				}
				c.op = op
			}
		}
		if c.op == "" {
			return c, badRequest(`Operation objects must contain exactly one member named "add", "remove", or "replace".`)
		}
		p, _ := m[c.op].(string)
		c.path = p
	}
	path, e := decodePointer(c.path)
	if e != nil {
		return c, e
	}
	if len(path) != 1 {
		return c, badRequest("Invalid JSON pointer for this resource: '/" + strings.Join(path, "/") + "'")
	}
	c.path = path[0]
	if c.op != "remove" {
		val, ok := m["value"]
		if !ok {
			return c, badRequest(`Operation "` + c.op + `" requires a member named "value".`)
		}
		c.value = val
	}
	if slices.Contains(readonlyKeys, c.path) || c.path == "id" || slices.Contains(disallowedKeys, c.path) {
		return c, forbidden("Attribute '" + c.path + "' is read-only.")
	}
	if c.path == "location" || c.path == "deleted" || c.path == "deleted_at" || strings.HasPrefix(c.path, reservedNamespace) {
		return c, forbidden("Attribute '" + c.path + "' is reserved.")
	}
	if c.path == "locations" {
		return c, forbidden("Berth stores no image data: an image has no locations.")
	}
	if c.op != "remove" {
		if e := checkSchema(map[string]any{c.path: c.value}, nil); e != nil {
			return c, e
		}
	}
	return c, nil
}

// decodePointer is _decode_json_pointer with _validate_json_pointer.
func decodePointer(p string) ([]string, *apiError) {
	switch {
	case !strings.HasPrefix(p, "/"):
		return nil, badRequest("Pointer `" + p + "` does not start with \"/\".")
	case adjacentSlashes.MatchString(p[1:]):
		return nil, badRequest("Pointer `" + p + "` contains adjacent \"/\".")
	case len(p) > 1 && strings.HasSuffix(p, "/"):
		return nil, badRequest("Pointer `" + p + "` end with \"/\".")
	case strings.TrimSpace(p[1:]) == "/":
		return nil, badRequest("Pointer `" + p + "` does not contains valid token.")
	case badTilde.MatchString(p) || strings.HasSuffix(p, "~"):
		return nil, badRequest("Pointer `" + p + "` contains \"~\" not part of a recognized escape sequence.")
	}
	var out []string
	for _, part := range strings.Split(strings.TrimLeft(p, "/"), "/") {
		out = append(out, strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")))
	}
	return out, nil
}

// apply is ImagesController._do_add, _do_replace and _do_remove.
func apply(img *Image, c change, draft int) *apiError {
	attr := slices.Contains(mutableAttrs, c.path)
	_, isProp := img.Properties[c.path]
	if c.path == CommandProperty {
		isProp = img.Command != nil
	}
	switch c.op {
	case "replace":
		if !attr && !isProp {
			return conflict("Property " + c.path + " does not exist.")
		}
	case "add":
		if draft == 4 && (attr || isProp) {
			return conflict("Property " + c.path + " already present.")
		}
	case "remove":
		switch {
		case attr:
			return forbidden("Property " + c.path + " may not be removed.")
		case !isProp:
			return conflict("Property " + c.path + " does not exist.")
		case c.path == CommandProperty:
			img.Command = nil
		default:
			delete(img.Properties, c.path)
		}
		return nil
	}
	return setAttr(img, c.path, c.value)
}

func stringOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return string(dumps(v))
}
