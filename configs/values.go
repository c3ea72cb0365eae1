package configs

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Value helpers: each returns the default when the value is unset and
// records a diagnostic at the value when it is wrong.

// attrRange is where attribute name's value sits in b, or where it would
// go when it is absent. Config files are HCL native syntax, whose bodies
// keep every attribute's range.
func attrRange(b hcl.Body, name string) *hcl.Range {
	if sb, ok := b.(*hclsyntax.Body); ok {
		if a, ok := sb.Attributes[name]; ok {
			r := a.Expr.Range()
			return &r
		}
	}
	r := b.MissingItemRange()
	return &r
}

// bad reports an error at the value of attribute name.
func (d *decoder) bad(b hcl.Body, name, summary, detail string) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   detail,
		Subject:  attrRange(b, name),
	})
}

func (d *decoder) str(v *string, def string) string {
	if v == nil {
		return def
	}
	return *v
}

func (d *decoder) boolean(v *bool, def bool) bool {
	if v == nil {
		return def
	}
	return *v
}

func (d *decoder) float(v *float64, def float64) float64 {
	if v == nil {
		return def
	}
	return *v
}

// count is an integer that must be at least min; why says what a smaller
// value would break.
func (d *decoder) count(b hcl.Body, name string, v *int64, def, min int64, why string) int64 {
	if v == nil {
		return def
	}
	if *v < min {
		d.bad(b, name, "Invalid "+name, fmt.Sprintf("%s must be at least %d (%s); got %d.", name, min, why, *v))
	}
	return *v
}

func (d *decoder) ratio(b hcl.Body, name string, v *float64, def float64) float64 {
	if v == nil {
		return def
	}
	if *v <= 0 {
		d.bad(b, name, "Invalid "+name,
			fmt.Sprintf("%s must be greater than 0: capacity is (total - reserved) * ratio; got %g.", name, *v))
	}
	return *v
}

func (d *decoder) duration(b hcl.Body, name string, v *string, def, min time.Duration, why string) time.Duration {
	if v == nil {
		return def
	}
	dur, err := time.ParseDuration(*v)
	if err != nil {
		d.bad(b, name, "Invalid duration",
			fmt.Sprintf("%s = %q is not a duration: write a number with a unit, like \"10s\", \"250ms\" or \"2m\".", name, *v))
		return def
	}
	if dur < min {
		d.bad(b, name, "Invalid "+name, fmt.Sprintf("%s must be at least %s (%s); got %s.", name, min, why, dur))
	}
	return dur
}

// leaseTTL is a duration that becomes an etcd lease TTL, which etcd counts
// in whole seconds.
func (d *decoder) leaseTTL(b hcl.Body, name string, v *string, def time.Duration) time.Duration {
	dur := d.duration(b, name, v, def, time.Second, "etcd leases last at least a second")
	if v != nil && dur >= time.Second && dur%time.Second != 0 {
		d.bad(b, name, "Invalid "+name, fmt.Sprintf("%s must be whole seconds (etcd lease TTLs are); got %s.", name, dur))
	}
	return dur
}

func (d *decoder) enum(b hcl.Body, name string, v *string, def string, allowed ...string) string {
	if v == nil {
		return def
	}
	for _, a := range allowed {
		if *v == a {
			return *v
		}
	}
	d.bad(b, name, "Invalid "+name, fmt.Sprintf("%s must be one of %s; got %q.", name, quoteList(allowed), *v))
	return def
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = strconv.Quote(x)
	}
	return strings.Join(q, ", ")
}

// bind is a listen address, checked now so a typo is not found only when
// the role starts.
func (d *decoder) bind(b hcl.Body, name string, v *string, def string) string {
	if v == nil {
		return def
	}
	_, port, err := net.SplitHostPort(*v)
	if err == nil {
		var n int
		n, err = strconv.Atoi(port)
		if err == nil && (n < 0 || n > 65535) {
			err = fmt.Errorf("port out of range")
		}
	}
	if err != nil {
		d.bad(b, name, "Invalid "+name,
			fmt.Sprintf("%s must be host:port, like \"127.0.0.1:8774\" or \":8774\"; got %q.", name, *v))
	}
	return *v
}

// memberURL is an embedded etcd URL of scheme: https when the etcd block
// has tls (the member serves it), http otherwise. A default is made
// https too.
func (d *decoder) memberURL(b hcl.Body, name string, v *string, def, scheme string) string {
	def = scheme + strings.TrimPrefix(def, "http")
	if v == nil {
		return def
	}
	u, err := url.Parse(*v)
	if err != nil || u.Scheme != scheme || u.Host == "" || u.Port() == "" {
		why := "embedded etcd serves plain HTTP without an etcd tls block"
		if scheme == "https" {
			why = "the etcd block's tls serves it"
		}
		d.bad(b, name, "Invalid "+name,
			fmt.Sprintf("%s must be an %s URL with a port, like %q (%s); got %q.", name, scheme, def, why, *v))
	}
	return *v
}

// zone reads an availability zone name: not empty, no colon (Nova's API
// uses "zone:host"), at most 255 characters.
func (d *decoder) zone(b hcl.Body, name string, v *string, def string) string {
	if v == nil {
		return def
	}
	if strings.TrimSpace(*v) == "" || len(*v) > 255 || strings.Contains(*v, ":") {
		d.bad(b, name, "Invalid "+name,
			fmt.Sprintf("%s must be 1 to 255 characters without ':'; got %q.", name, *v))
	}
	return *v
}

// nameRE is what a host or cell may be called: it becomes one segment of
// etcd keys (/hosts/<host>/...), so no slashes or spaces.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$`)

func (d *decoder) name(b hcl.Body, name string, v *string) string {
	if v == nil {
		return ""
	}
	if !nameRE.MatchString(*v) {
		d.bad(b, name, "Invalid "+name,
			fmt.Sprintf("%s must be letters, digits, \".\", \"_\" or \"-\", starting with a letter or digit (it is part of etcd keys); got %q.", name, *v))
	}
	return *v
}

// advertiseURL is the http(s) base URL other processes use to reach a
// server; "" means "derive it from bind".
func (d *decoder) advertiseURL(b hcl.Body, name string, v *string, def string) string {
	if v == nil || *v == "" {
		return def
	}
	u, err := url.Parse(*v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		d.bad(b, name, "Invalid "+name,
			fmt.Sprintf("%s must be an http(s) URL with a host and no path, like \"http://10.0.0.5:8775\"; got %q.", name, *v))
	}
	return *v
}
