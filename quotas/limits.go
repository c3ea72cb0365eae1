package quotas

import "sort"

// The quota resources, as nova/quota.py's QUOTAS registers them. Berth
// counts and enforces Instances, Cores, RAM, ServerGroups and
// ServerGroupMembers; the others are limits Nova shows (and lets an
// admin set) for things Berth does not have, answered as Nova answers
// them so clients see the same quota set.
const (
	Instances                = "instances"
	Cores                    = "cores"
	RAM                      = "ram"
	MetadataItems            = "metadata_items"
	InjectedFiles            = "injected_files"
	InjectedFileContentBytes = "injected_file_content_bytes"
	InjectedFilePathBytes    = "injected_file_path_bytes"
	KeyPairs                 = "key_pairs"
	ServerGroups             = "server_groups"
	ServerGroupMembers       = "server_group_members"
	FixedIPs                 = "fixed_ips"
	FloatingIPs              = "floating_ips"
	SecurityGroups           = "security_groups"
	SecurityGroupRules       = "security_group_rules"
)

// Unlimited is the limit of a resource with no quota (Nova's -1).
const Unlimited = -1

// Limits is a limit per resource name.
type Limits map[string]int64

// Resources is every resource in QUOTAS.resources order (sorted by name),
// the order os-quota-sets lists them in.
var Resources = func() []string {
	r := []string{Instances, Cores, RAM, MetadataItems, InjectedFiles, InjectedFileContentBytes,
		InjectedFilePathBytes, KeyPairs, ServerGroups, ServerGroupMembers, FixedIPs, FloatingIPs,
		SecurityGroups, SecurityGroupRules}
	sort.Strings(r)
	return r
}()

// NovaDefaults are nova.conf's [quota] defaults (nova/conf/quota.py);
// the nova-network resources have no option and are unlimited.
func NovaDefaults() Limits {
	return Limits{Instances: 10, Cores: 20, RAM: 50 * 1024, MetadataItems: 128, InjectedFiles: 5,
		InjectedFileContentBytes: 10 * 1024, InjectedFilePathBytes: 255, KeyPairs: 100, ServerGroups: 10,
		ServerGroupMembers: 10, FixedIPs: Unlimited, FloatingIPs: Unlimited, SecurityGroups: Unlimited,
		SecurityGroupRules: Unlimited}
}

// Known reports whether name is a quota resource.
func Known(name string) bool {
	i := sort.SearchStrings(Resources, name)
	return i < len(Resources) && Resources[i] == name
}

// Clone returns a copy of l.
func (l Limits) Clone() Limits {
	c := make(Limits, len(l))
	for k, v := range l {
		c[k] = v
	}
	return c
}

// within reports whether used+delta fits limit (Unlimited fits anything).
func within(limit, used, delta int64) bool { return limit < 0 || used+delta <= limit }
