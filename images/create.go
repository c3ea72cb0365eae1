package images

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-project/berth/internal/pycompat"
)

// Which of a body's keys are what, in Glance 25's words
// (RequestDeserializer and ImageFactory).
var (
	// disallowedKeys are refused before the schema is checked.
	disallowedKeys = []string{"direct_url", "self", "file", "schema", "stores"}
	// baseKeys are the image's own attributes; any other key is an
	// additional property.
	baseKeys = []string{"checksum", "created_at", "container_format", "disk_format", "id", "min_disk", "min_ram",
		"name", "size", "virtual_size", "status", "tags", "owner", "updated_at", "visibility", "protected", "os_hidden"}
	// readonlyKeys may not be given (ImageFactory._readonly_properties,
	// with the hashes, which Berth never has).
	readonlyKeys = []string{"created_at", "updated_at", "status", "checksum", "os_hash_algo", "os_hash_value",
		"size", "virtual_size"}
	// reservedProperties may not be additional properties.
	reservedProperties = []string{"owner", "locations", "location", "deleted", "deleted_at", "direct_url", "self",
		"file", "schema"}
)

// reservedNamespace is Glance's own property prefix (GLANCE_RESERVED_NS).
const reservedNamespace = "os_glance"

// checkSchema is glance.schema.Schema.validate: the schema's 400.
func checkSchema(v any, order pycompat.KeyOrder) *apiError {
	if e := pycompat.Validate(v, imageSchema, order); e != nil {
		return badRequest("Provided object does not match schema 'image': " + e.String())
	}
	return nil
}

// create is POST /v2/images, in Glance's order: the deserializer's
// read-only keys (403), the schema (400), the reserved properties (403),
// the add_image policy (403), ImageFactory's read-only attributes (403),
// then Berth's own checks (berth_command, os_hidden) and the duplicate
// id (409). The image is active at once: there is no data to wait for.
//
// add_image is admin-only, where Glance lets a project member add its
// project's images: a Berth image is a command every host may run.
func (a *API) create(q *request) *apiError {
	v, order, e := readBody(q.r)
	if e != nil {
		return e
	}
	body, ok := v.(map[string]any)
	if !ok {
		return badRequest("The request body must be a JSON object of the image's attributes.")
	}
	for _, k := range disallowedKeys {
		if _, ok := body[k]; ok {
			return forbidden("Attribute '" + k + "' is read-only.")
		}
	}
	if e := checkSchema(body, order); e != nil {
		return e
	}
	for k := range body {
		if slices.Contains(baseKeys, k) {
			continue
		}
		if len(k) > 255 {
			return badRequest("Custom property should not be greater than 255 characters.")
		}
		if k == "location" || k == "deleted" || k == "deleted_at" || strings.HasPrefix(k, reservedNamespace) {
			return forbidden("Attribute '" + k + "' is reserved.")
		}
	}
	if !q.who.admin {
		return notAuthorized("add_image")
	}
	for _, k := range readonlyKeys {
		if _, ok := body[k]; ok {
			return forbidden("Attribute '" + k + "' is read-only.")
		}
	}
	for _, k := range reservedProperties {
		if _, ok := body[k]; ok && !slices.Contains(baseKeys, k) {
			return forbidden("Attribute '" + k + "' is reserved.")
		}
	}
	now := a.now().UTC()
	img := &Image{ID: newUUID(), Status: StatusActive, Visibility: VisibilityShared, CreatedAt: now, UpdatedAt: now}
	if q.who.project != "" {
		p := q.who.project
		img.Owner = &p
	}
	if id, ok := body["id"].(string); ok {
		img.ID = strings.ToLower(id)
	}
	for _, k := range sortedKeys(body) {
		if k == "id" {
			continue
		}
		if e := setAttr(img, k, body[k]); e != nil {
			return e
		}
	}
	if e := checkQuotas(img); e != nil {
		return e
	}
	err := a.store.Create(q.r.Context(), img)
	switch {
	case errors.Is(err, ErrDuplicate):
		return conflict("Image ID " + img.ID + " already exists!")
	case errors.Is(err, ErrTooLarge):
		return tooLarge()
	case err != nil:
		return a.storeError(q, err)
	}
	a.log.Info("image created", "image", img.ID, "name", nameOf(img), "visibility", img.Visibility,
		"command", FormatCommand(img.Command))
	q.w.Header().Set("Location", "http://"+q.r.Host+"/v2/images/"+img.ID)
	writeJSON(q.w, http.StatusCreated, view(img))
	return nil
}

// Glance's image_property_quota and image_tag_quota defaults.
const (
	maxProperties = 128
	maxTags       = 128
)

// checkQuotas is Glance's quota proxy: 413s past the property or tag
// quota (berth_command counts as a property).
func checkQuotas(img *Image) *apiError {
	props := len(img.Properties)
	if img.Command != nil {
		props++
	}
	if props > maxProperties {
		return &apiError{status: http.StatusRequestEntityTooLarge, explanation: fmt.Sprintf(
			"The limit has been exceeded on the number of allowed image properties. Attempted: %d, Maximum: %d", props, maxProperties)}
	}
	if len(img.Tags) > maxTags {
		return &apiError{status: http.StatusRequestEntityTooLarge, explanation: fmt.Sprintf(
			"The limit has been exceeded on the number of allowed image tags. Attempted: %d, Maximum: %d", len(img.Tags), maxTags)}
	}
	return nil
}

// tooLarge is Berth's 413 for a record past maxRecordBytes.
func tooLarge() *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, asJSON: true, explanation: fmt.Sprintf(
		"The image's properties and tags are more than Berth keeps for one image (%d bytes): it is stored as one etcd value.", maxRecordBytes)}
}

func nameOf(img *Image) string {
	if img.Name == nil {
		return ""
	}
	return *img.Name
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// setAttr sets attribute or property k of img to v, a value the schema
// has accepted: the image's own attributes by their types, any other
// key as an additional property (berth_command parsed into Command).
func setAttr(img *Image, k string, v any) *apiError {
	optString := func() *string {
		if s, ok := v.(string); ok {
			return &s
		}
		return nil
	}
	switch k {
	case "name":
		img.Name = optString()
	case "owner":
		img.Owner = optString()
	case "disk_format":
		img.DiskFormat = optString()
	case "container_format":
		img.ContainerFormat = optString()
	case "visibility":
		img.Visibility = v.(string)
	case "protected":
		img.Protected = v.(bool)
	case "os_hidden":
		if v.(bool) {
			return badRequest("Berth does not hide images: os_hidden may only be false.")
		}
	case "tags":
		img.Tags = img.Tags[:0:0]
		for _, t := range v.([]any) {
			if s := t.(string); !slices.Contains(img.Tags, s) { // Glance keeps tags as a set
				img.Tags = append(img.Tags, s)
			}
		}
	case "min_ram", "min_disk":
		n, ok := integer(v)
		if !ok || n < 0 {
			return badRequest("Invalid value '" + number(v) + "' for parameter '" + k + "': Cannot be a negative value")
		}
		if k == "min_ram" {
			img.MinRAMMB = n
		} else {
			img.MinDiskGB = n
		}
	case CommandProperty:
		s, _ := v.(string)
		argv, err := ParseCommand(s)
		if err != nil {
			return badRequest(err.Error())
		}
		img.Command = argv
	default:
		s, _ := v.(string) // null (a schema property that allows it) is stored as "", as Glance shows it
		if img.Properties == nil {
			img.Properties = map[string]string{}
		}
		img.Properties[k] = s
	}
	return nil
}

// integer is a schema-checked integer (json.Number, maybe "1.0").
func integer(v any) (int, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || f != float64(int(f)) || f > 1<<31-1 {
		return 0, false
	}
	return int(f), true
}

func number(v any) string {
	if n, ok := v.(json.Number); ok {
		return string(n)
	}
	return ""
}
