package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// The roles Berth knows, Keystone's default ones. Keystone's bootstrap
// makes admin imply member and member imply reader, and a token lists
// the implied roles too: an admin's token says admin, member and reader.
const (
	RoleAdmin  = "admin"
	RoleMember = "member"
	RoleReader = "reader"
)

// Roles are the known roles, strongest first.
var Roles = []string{RoleAdmin, RoleMember, RoleReader}

// The one domain: Berth's users and projects all live in Keystone's
// "default" domain, which is what clouds.yaml files name when they name
// one (user_domain_name: Default).
const (
	DefaultDomainID   = "default"
	DefaultDomainName = "Default"
)

// SystemAll is the one system scope Keystone has, {"system": {"all": true}}.
const SystemAll = "all"

// Config is the identity API's directory and catalog, as package configs
// decodes it from the HCL identity block (which checks every reference).
type Config struct {
	Users       []User
	Projects    []Project
	Assignments []Assignment
	// Endpoints make the service catalog, in this order.
	Endpoints []Endpoint
	Region    string
	TokenTTL  time.Duration
}

// User is one user; ID "" is derived from the name (DerivedID).
type User struct {
	ID, Name     string
	PasswordHash string // bcrypt
}

// Project is one project; ID "" is derived from the name.
type Project struct {
	ID, Name string
}

// Assignment gives a user a role on a project (by name) or, with System
// set, on the system.
type Assignment struct {
	User, Project string
	System        bool
	Role          string
}

// Endpoint is one service of the catalog: its type (compute, placement,
// image, identity) and its URL per interface.
type Endpoint struct {
	Type                    string
	Public, Internal, Admin string
}

// DerivedID is the id of a user, project or role the config names
// without one: 32 hex digits like Keystone's ids, the same on every
// server reading the same config, so a project's servers keep their
// owner across restarts.
func DerivedID(kind, name string) string {
	sum := sha256.Sum256([]byte("berth-identity:" + kind + ":" + name))
	return hex.EncodeToString(sum[:16])
}

type user struct {
	id, name string
	hash     []byte
	// projectRoles maps a project id to the roles assigned there;
	// systemRoles are the system-scope roles. Both implied-role expanded.
	projectRoles map[string][]string
	systemRoles  []string
}

type project struct {
	id, name string
}

// directory is Config indexed for logins and token checks.
type directory struct {
	usersByName, usersByID       map[string]*user
	projectsByName, projectsByID map[string]*project
}

func newDirectory(c Config) (*directory, error) {
	d := &directory{
		usersByName: map[string]*user{}, usersByID: map[string]*user{},
		projectsByName: map[string]*project{}, projectsByID: map[string]*project{},
	}
	for _, u := range c.Users {
		id := u.ID
		if id == "" {
			id = DerivedID("user", u.Name)
		}
		if d.usersByName[u.Name] != nil || d.usersByID[id] != nil {
			return nil, fmt.Errorf("identity: user %q (id %s) defined twice", u.Name, id)
		}
		nu := &user{id: id, name: u.Name, hash: []byte(u.PasswordHash), projectRoles: map[string][]string{}}
		d.usersByName[u.Name], d.usersByID[id] = nu, nu
	}
	for _, p := range c.Projects {
		id := p.ID
		if id == "" {
			id = DerivedID("project", p.Name)
		}
		if d.projectsByName[p.Name] != nil || d.projectsByID[id] != nil {
			return nil, fmt.Errorf("identity: project %q (id %s) defined twice", p.Name, id)
		}
		np := &project{id: id, name: p.Name}
		d.projectsByName[p.Name], d.projectsByID[id] = np, np
	}
	for _, a := range c.Assignments {
		u := d.usersByName[a.User]
		if u == nil {
			return nil, fmt.Errorf("identity: role %s assigned to unknown user %q", a.Role, a.User)
		}
		if !slices.Contains(Roles, a.Role) {
			return nil, fmt.Errorf("identity: unknown role %q (want one of %v)", a.Role, Roles)
		}
		if a.System {
			u.systemRoles = withImplied(u.systemRoles, a.Role)
			continue
		}
		p := d.projectsByName[a.Project]
		if p == nil {
			return nil, fmt.Errorf("identity: user %q assigned to unknown project %q", a.User, a.Project)
		}
		u.projectRoles[p.id] = withImplied(u.projectRoles[p.id], a.Role)
	}
	return d, nil
}

// withImplied adds role and the roles it implies to have, keeping
// Roles' order (strongest first).
func withImplied(have []string, role string) []string {
	i := slices.Index(Roles, role)
	var out []string
	for j, r := range Roles {
		if j >= i || slices.Contains(have, r) {
			out = append(out, r)
		}
	}
	return out
}

// roleID is a role's id in token bodies: derived, like unnamed users'.
func roleID(name string) string { return DerivedID("role", name) }
