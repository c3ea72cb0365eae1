package images

import (
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/berth-project/berth/etcdschema"
)

// view is ResponseSerializer._format_image: the additional properties
// first (berth_command among them), then Glance's attributes in its
// order, size, checksum and hashes null (Berth keeps no data).
func view(img *etcdschema.Image) obj {
	props := make([]string, 0, len(img.Properties)+1)
	for k := range img.Properties {
		props = append(props, k)
	}
	if img.Command != nil {
		props = append(props, CommandProperty)
	}
	sort.Strings(props)
	o := make(obj, 0, len(props)+22)
	for _, k := range props {
		v := img.Properties[k]
		if k == CommandProperty {
			v = FormatCommand(img.Command)
		}
		o = append(o, member{k, v})
	}
	tags := img.Tags
	if tags == nil {
		tags = []string{}
	}
	self := "/v2/images/" + img.ID
	return append(o,
		member{"name", img.Name}, member{"disk_format", img.DiskFormat},
		member{"container_format", img.ContainerFormat}, member{"visibility", img.Visibility},
		member{"size", nil}, member{"virtual_size", nil}, member{"status", img.Status},
		member{"checksum", nil}, member{"protected", img.Protected}, member{"min_ram", img.MinRAMMB},
		member{"min_disk", img.MinDiskGB}, member{"owner", img.Owner}, member{"os_hidden", false},
		member{"os_hash_algo", nil}, member{"os_hash_value", nil}, member{"id", img.ID},
		member{"created_at", isotime(img.CreatedAt)}, member{"updated_at", isotime(img.UpdatedAt)},
		member{"tags", tags}, member{"self", self}, member{"file", self + "/file"},
		member{"schema", "/v2/schemas/image"})
}

// isotime is glance.common.timeutils.isotime: UTC to the second, "Z".
func isotime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// listView is ResponseSerializer.index: the page, the first link (the
// query without its marker), the schema, and when the page was full the
// next link (the query with the page's last id as marker). Parameters
// keep the order they came in; a repeated one is given once, its last
// value, as dict(webob's params) leaves it.
func listView(page []*etcdschema.Image, rawQuery string, more bool) obj {
	type param struct{ k, v string }
	var params []param
	for _, part := range strings.Split(rawQuery, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		k, _ = url.QueryUnescape(k)
		v, _ = url.QueryUnescape(v)
		found := false
		for i := range params {
			if params[i].k == k {
				params[i].v, found = v, true
			}
		}
		if !found {
			params = append(params, param{k, v})
		}
	}
	encode := func(marker string) string {
		var parts []string
		for _, p := range params {
			if p.k == "marker" {
				if marker == "" {
					continue
				}
				p.v, marker = marker, ""
			}
			parts = append(parts, url.QueryEscape(p.k)+"="+url.QueryEscape(p.v))
		}
		if marker != "" {
			parts = append(parts, "marker="+url.QueryEscape(marker))
		}
		return strings.Join(parts, "&")
	}
	images := make([]any, len(page))
	for i, img := range page {
		images[i] = view(img)
	}
	first := "/v2/images"
	if q := encode(""); q != "" {
		first += "?" + q
	}
	o := obj{{"images", images}, {"first", first}, {"schema", "/v2/schemas/images"}}
	if more && len(page) > 0 {
		o = append(o, member{"next", "/v2/images?" + encode(page[len(page)-1].ID)})
	}
	return o
}
