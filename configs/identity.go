package configs

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/hashicorp/hcl/v2"
	"golang.org/x/crypto/bcrypt"
)

// identityIDRE is what an explicit user or project id may be: ids appear
// in etcd records (a server's project) and URLs, so no slashes or spaces.
var identityIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// identity decodes the identity block, checking every reference: an
// assignment's user and project must be defined in the block, its role
// one of IdentityRoles.
func (d *decoder) identity(r *rawIdentity) *Identity {
	def := DefaultIdentity()
	id := &Identity{
		Bind:      d.identityBind(r),
		TokenTTL:  d.duration(r.Body, "token_ttl", r.TokenTTL, def.TokenTTL, time.Minute, "a client needs time to use its token"),
		Region:    d.str(r.Region, def.Region),
		declRange: r.DefRange,
	}
	if strings.TrimSpace(id.Region) == "" {
		d.bad(r.Body, "region", "Empty region", "The catalog names every endpoint's region; leave region out for \"RegionOne\".")
	}
	users := map[string]hcl.Range{}
	ids := map[string]hcl.Range{}
	for _, u := range r.Users {
		if !d.identityName("user", u.Name, u.LabelRange, users) {
			continue
		}
		nu := IdentityUser{Name: u.Name, ID: d.identityID(u.Body, u.ID, ids)}
		switch {
		case u.PasswordHash == nil:
			d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing password_hash",
				Detail:  fmt.Sprintf("User %q needs password_hash = \"$2a$...\": make one with `berth identity hash-password`.", u.Name),
				Subject: u.DefRange.Ptr()})
		default:
			if _, err := bcrypt.Cost([]byte(*u.PasswordHash)); err != nil {
				d.bad(u.Body, "password_hash", "Invalid password_hash",
					fmt.Sprintf("password_hash must be a bcrypt hash (\"$2a$10$...\", from `berth identity hash-password`), never the password itself: %v.", err))
			}
			nu.PasswordHash = *u.PasswordHash
		}
		id.Users = append(id.Users, nu)
	}
	projects := map[string]hcl.Range{}
	for _, p := range r.Projects {
		if !d.identityName("project", p.Name, p.LabelRange, projects) {
			continue
		}
		id.Projects = append(id.Projects, IdentityProject{Name: p.Name, ID: d.identityID(p.Body, p.ID, ids)})
	}
	for _, a := range r.Assignments {
		if ra, ok := d.assignment(a, users, projects); ok {
			id.Assignments = append(id.Assignments, ra)
		}
	}
	seen := map[string]hcl.Range{}
	for _, e := range r.Endpoints {
		if !slices.Contains(CatalogEndpointTypes, e.Type) {
			d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown endpoint type",
				Detail:  fmt.Sprintf("endpoint %q: the catalog serves %s.", e.Type, quoteList(CatalogEndpointTypes)),
				Subject: e.LabelRange.Ptr()})
			continue
		}
		if prev, dup := seen[e.Type]; dup {
			d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate endpoint",
				Detail: fmt.Sprintf("endpoint %q is already defined at %s.", e.Type, prev), Subject: e.LabelRange.Ptr()})
			continue
		}
		seen[e.Type] = e.LabelRange
		if e.Public == nil {
			d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing public",
				Detail:  fmt.Sprintf("endpoint %q needs public = \"http://...\", the URL clients use.", e.Type),
				Subject: e.DefRange.Ptr()})
			continue
		}
		ce := CatalogEndpoint{Type: e.Type, Public: d.endpointURL(e.Body, "public", e.Public)}
		ce.Internal = d.endpointURL(e.Body, "internal", e.Internal)
		ce.Admin = d.endpointURL(e.Body, "admin", e.Admin)
		if ce.Internal == "" {
			ce.Internal = ce.Public
		}
		if ce.Admin == "" {
			ce.Admin = ce.Public
		}
		id.Endpoints = append(id.Endpoints, ce)
	}
	return id
}

// identityBind is the block's bind, where "" is allowed: no identity
// API here, the block only checks tokens (see Identity.Bind).
func (d *decoder) identityBind(r *rawIdentity) string {
	if r.Bind != nil && *r.Bind == "" {
		return ""
	}
	return d.bind(r.Body, "bind", r.Bind, DefaultIdentity().Bind)
}

// identityName checks a user's or project's label: not empty, no control
// characters (they would not survive a clouds.yaml), defined once.
func (d *decoder) identityName(kind, name string, at hcl.Range, seen map[string]hcl.Range) bool {
	if strings.TrimSpace(name) == "" || strings.ContainsFunc(name, unicode.IsControl) || len(name) > 255 {
		d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + kind + " name",
			Detail: fmt.Sprintf("A %s's name is 1 to 255 characters, not blank, without control characters; got %q.", kind, name), Subject: at.Ptr()})
		return false
	}
	if prev, dup := seen[name]; dup {
		d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate " + kind,
			Detail: fmt.Sprintf("%s %q is already defined at %s.", kind, name, prev), Subject: at.Ptr()})
		return false
	}
	seen[name] = at
	return true
}

// identityID checks an explicit id: its shape, and that no other user or
// project has it.
func (d *decoder) identityID(b hcl.Body, v *string, seen map[string]hcl.Range) string {
	if v == nil {
		return ""
	}
	switch at := *attrRange(b, "id"); {
	case !identityIDRE.MatchString(*v):
		d.bad(b, "id", "Invalid id", fmt.Sprintf("id must be 1 to 64 letters, digits, \"_\" or \"-\" (like Keystone's 32 hex digits); got %q.", *v))
	case seen[*v] != hcl.Range{}:
		d.bad(b, "id", "Duplicate id", fmt.Sprintf("id %q is already used at %s.", *v, seen[*v]))
	default:
		seen[*v] = at
	}
	return *v
}

func (d *decoder) assignment(a rawAssignment, users, projects map[string]hcl.Range) (RoleAssignment, bool) {
	n := len(d.diags)
	ra := RoleAssignment{User: d.str(a.User, ""), Project: d.str(a.Project, ""), Role: d.str(a.Role, "")}
	missing := func(name, detail string) {
		d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing " + name, Detail: detail, Subject: a.DefRange.Ptr()})
	}
	switch {
	case a.User == nil:
		missing("user", "An assignment gives a user a role: set user = \"<name of a user block>\".")
	case users[ra.User] == hcl.Range{}:
		d.bad(a.Body, "user", "Unknown user", fmt.Sprintf("No user %q is defined in this identity block.", ra.User))
	}
	switch {
	case a.Role == nil:
		missing("role", fmt.Sprintf("Set role = one of %s.", quoteList(IdentityRoles)))
	case !slices.Contains(IdentityRoles, ra.Role):
		d.bad(a.Body, "role", "Unknown role", fmt.Sprintf("role must be one of %s (admin implies member, member implies reader); got %q.", quoteList(IdentityRoles), ra.Role))
	}
	switch {
	case a.Project != nil && a.System != nil:
		d.bad(a.Body, "system", "Both project and system", "An assignment is on one project or on the system; split it in two.")
	case a.System != nil:
		if *a.System != "all" {
			d.bad(a.Body, "system", "Invalid system", fmt.Sprintf("system must be \"all\" (Keystone's one system scope); got %q.", *a.System))
		}
		ra.System = true
	case a.Project == nil:
		missing("project", "Set project = \"<name of a project block>\", or system = \"all\".")
	case projects[ra.Project] == hcl.Range{}:
		d.bad(a.Body, "project", "Unknown project", fmt.Sprintf("No project %q is defined in this identity block.", ra.Project))
	}
	return ra, len(d.diags) == n
}

// endpointURL is a catalog URL: absolute http(s) with a host ("" unset).
func (d *decoder) endpointURL(b hcl.Body, name string, v *string) string {
	if v == nil {
		return ""
	}
	u, err := url.Parse(*v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		d.bad(b, name, "Invalid "+name, fmt.Sprintf("%s must be an http(s) URL clients can reach, like \"http://10.0.0.5:8774/v2.1\"; got %q.", name, *v))
	}
	return *v
}

// PublicURL is where a client refused by an API should log in: the
// catalog's identity endpoint (its public URL), else the API this block
// serves, with /v3; "" when neither is known. The compute and Placement
// APIs name it in their 401s (keystonemiddleware's www_authenticate_uri).
func (c *Identity) PublicURL() string {
	for _, e := range c.Endpoints {
		if e.Type == "identity" {
			return e.Public
		}
	}
	if c.Bind == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(c.Bind)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/v3"
}
