package etcdauth

import (
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Perm is one grant of a role: Key alone, or the range [Key, RangeEnd).
type Perm struct {
	Type          clientv3.PermissionType
	Key, RangeEnd string
}

// Role is a named set of grants.
type Role struct {
	Name  string
	Perms []Perm
}

// Host is a compute host: its agent's name, cell and provider.
type Host struct {
	Name, Cell, ProviderUUID string
}

// Role names.
const (
	ServerRole = "berth-server"
	MemberRole = "berth-member"
	// RootRole is etcd's own all-powerful role.
	RootRole = "root"
)

// ConductorRoleName and AgentRoleName name the per-cell and per-host roles.
func ConductorRoleName(cell string) string { return "berth-conductor-" + cell }
func AgentRoleName(host string) string     { return "berth-agent-" + host }

func readWrite(key string) Perm {
	return Perm{Type: clientv3.PermissionType(clientv3.PermReadWrite), Key: key}
}

func readWritePrefix(prefix string) Perm {
	return Perm{Type: clientv3.PermissionType(clientv3.PermReadWrite), Key: prefix, RangeEnd: clientv3.GetPrefixRangeEnd(prefix)}
}

// readAllButSigningKey reads every key under the prefix but the identity
// signing key.
func readAllButSigningKey(k etcdschema.Keys) []Perm {
	secret := k.IdentitySigningKey()
	return []Perm{
		{Type: clientv3.PermissionType(clientv3.PermRead), Key: k.All(), RangeEnd: secret},
		{Type: clientv3.PermissionType(clientv3.PermRead), Key: secret + "\x00", RangeEnd: clientv3.GetPrefixRangeEnd(k.All())},
	}
}

// Server is the role of `berth server` machines: everything under the
// prefix (plus etcd's root role, granted beside it by Plan).
func Server(k etcdschema.Keys) Role {
	return Role{Name: ServerRole, Perms: []Perm{readWritePrefix(k.All())}}
}

// Member is the role of machines that run only an etcd member.
func Member(k etcdschema.Keys) Role {
	return Role{Name: MemberRole, Perms: readAllButSigningKey(k)}
}

// Conductor is the role of cell's conductors; hosts are the cell's
// compute hosts (the others are ignored).
func Conductor(k etcdschema.Keys, cell string, hosts []Host) Role {
	perms := append(readAllButSigningKey(k),
		readWrite(k.Cell(cell)),
		readWritePrefix(k.Cell(cell)+"/"),
		// Keyed by uuid, not by cell: see the package comment.
		readWritePrefix(k.Consumers()),
		readWritePrefix(k.AlternatesPrefix()),
		readWritePrefix(k.ServerGroups()),
		// A move that ends here (no alternate left, an evacuation's
		// source freed) ends its migration's mapping.
		readWritePrefix(k.MigrationMappings()),
	)
	for _, h := range hosts {
		if h.Cell == cell {
			perms = append(perms, readWritePrefix(k.Builds(h.Name)), readWrite(k.Provider(h.ProviderUUID)))
		}
	}
	return Role{Name: ConductorRoleName(cell), Perms: perms}
}

// Agent is the role of host's agent; hosts are every compute host (the
// other cells' are ignored).
//
// A cold move is worked by the agents of its source and destination,
// which are in one cell: each step records the migration, casts the next
// step to the other host, and may move allocations between the two
// hosts' providers (a revert gives the instance its source's back and
// frees the destination's claim) or drop the other host's instance info.
// So an agent also writes its cell's migrations and, for each host of
// its cell, the builds, instance info and provider; and, keyed by uuid,
// migration mappings and server group members (a settled move's place).
func Agent(k etcdschema.Keys, h Host, hosts []Host) Role {
	perms := append(readAllButSigningKey(k),
		readWritePrefix(k.HostPrefix(h.Name)),
		readWrite(k.HostMapping(h.Name)),
		readWrite(k.Provider(h.ProviderUUID)),
		readWrite(k.ProviderName(h.Name)),
		readWritePrefix(k.CellInstances(h.Cell)),
		readWritePrefix(k.Retries(h.Cell)),
		readWritePrefix(k.Migrations(h.Cell)),
		// Keyed by instance uuid, not by host: see the package comment.
		readWritePrefix(k.Consumers()),
		readWritePrefix(k.AlternatesPrefix()),
		readWritePrefix(k.InstanceMappings()),
		readWritePrefix(k.MigrationMappings()),
		readWritePrefix(k.ServerGroups()),
		// Keyed by project and instance: a deleted instance's entry in
		// its project's quota index goes with its mapping.
		readWritePrefix(k.QuotaInstancesAll()),
	)
	for _, o := range hosts {
		if o.Cell == h.Cell && o.Name != h.Name {
			perms = append(perms, readWritePrefix(k.Builds(o.Name)), readWritePrefix(k.HostInstances(o.Name)),
				readWrite(k.Provider(o.ProviderUUID)))
		}
	}
	return Role{Name: AgentRoleName(h.Name), Perms: perms}
}

// Machines are a deployment's machines by what they run, each named as
// its certificate is.
type Machines struct {
	Servers []string
	// Conductors maps a machine to the cell of its conductor.
	Conductors map[string]string
	// Agents are the compute hosts; an agent's machine is its host name.
	Agents []Host
	// Members run only an etcd member.
	Members []string
}

// User is one etcd user and its roles' names.
type User struct {
	Name  string
	Roles []string
}

// Plan is the roles and users of m: one user per machine, with the role
// of everything it runs.
func Plan(k etcdschema.Keys, m Machines) ([]Role, []User) {
	var roles []Role
	users := map[string][]string{}
	add := func(user string, r Role) {
		if !slices.ContainsFunc(roles, func(o Role) bool { return o.Name == r.Name }) {
			roles = append(roles, r)
		}
		if !slices.Contains(users[user], r.Name) {
			users[user] = append(users[user], r.Name)
		}
	}
	for _, s := range m.Servers {
		add(s, Server(k))
		users[s] = append(users[s], RootRole)
	}
	for machine, cell := range m.Conductors {
		add(machine, Conductor(k, cell, m.Agents))
	}
	for _, h := range m.Agents {
		add(h.Name, Agent(k, h, m.Agents))
	}
	for _, mb := range m.Members {
		add(mb, Member(k))
	}
	var out []User
	for name, rs := range users {
		out = append(out, User{Name: name, Roles: rs})
	}
	slices.SortFunc(out, func(a, b User) int {
		if a.Name < b.Name {
			return -1
		}
		if a.Name > b.Name {
			return 1
		}
		return 0
	})
	return roles, out
}
