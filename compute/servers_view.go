package compute

import (
	"maps"
	"strings"

	"github.com/berth-project/berth/etcdschema"
)

// The server view: nova/api/openstack/compute/views/servers.py, members
// in the order its dicts are built.

// Microversions that change the server view.
const (
	mvExtendedAttrs       = 3  // OS-EXT-SRV-ATTR: reservation_id ... user_data
	mvHostStatus          = 16 // host_status
	mvLocked              = 9  // locked
	mvDescription         = 19 // description
	mvTags                = 26 // tags; tag filters
	mvInvalidStatus400    = 38 // an unknown status filter is a 400
	mvEmbeddedFlavor      = 47 // the flavor embedded, not linked
	mvChangesBefore       = 66 // changes-before
	mvTrustedCerts        = 63 // trusted_image_certificates
	mvServerGroups        = 71 // server_groups in show
	mvLockedReason        = 73 // locked_reason; locked filter and sort key
	mvStrictServerQuery   = 75 // unknown query parameters refused
	mvHostnameForNonAdmin = 90 // OS-EXT-SRV-ATTR:hostname for everyone
)

// viewOpts are the policy answers a view depends on, computed once per
// request as Nova's detail does.
type viewOpts struct {
	extraSpecs   bool // os_compute_api:servers:show:flavor-extra-specs
	extendedAttr bool // os_compute_api:os-extended-server-attributes
	isAdmin      bool // context.is_admin: fault details of a 500
	// hostStatus is host_status by host (nil: not shown; the policy
	// os_compute_api:servers:show:host_status refused it).
	hostStatus map[string]string
	// serverGroups: show from 2.71 lists the server's group.
	serverGroups bool
}

// serverLinks is ViewBuilder._get_links for a server.
func serverLinks(base, id string) []obj {
	bookmark := strings.TrimSuffix(base, "/v2.1")
	return []obj{
		{{"rel", "self"}, {"href", urlJoin(base, "servers", id)}},
		{{"rel", "bookmark"}, {"href", urlJoin(bookmark, "servers", id)}},
	}
}

// basicServerView is ViewBuilder.basic (GET /servers).
func basicServerView(c *reqCtx, s *serverState) obj {
	return obj{{"id", s.id}, {"name", s.name}, {"links", serverLinks(c.baseURL, s.id)}}
}

func imageView(c *reqCtx, s *serverState) any {
	if s.image == nil || s.image.ID == "" {
		return ""
	}
	bookmark := strings.TrimSuffix(c.baseURL, "/v2.1")
	return obj{{"id", s.image.ID}, {"links", []obj{{{"rel", "bookmark"}, {"href", urlJoin(bookmark, "images", s.image.ID)}}}}}
}

// flavorOfServer is _get_flavor: a link to the flavor before 2.47, the
// flavor itself (its sizes when the server was created) from 2.47.
func flavorOfServer(c *reqCtx, s *serverState, extraSpecs bool) obj {
	f := s.flavor
	if !c.v.atLeast(mvEmbeddedFlavor) {
		bookmark := strings.TrimSuffix(c.baseURL, "/v2.1")
		return obj{{"id", f.ID}, {"links", []obj{{{"rel", "bookmark"}, {"href", urlJoin(bookmark, "flavors", f.ID)}}}}}
	}
	o := obj{{"vcpus", f.VCPUs}, {"ram", f.RAMMB}, {"disk", f.DiskGB}, {"ephemeral", f.EphemeralGB},
		{"swap", f.SwapMB}, {"original_name", f.Name}}
	if extraSpecs {
		specs := maps.Clone(f.ExtraSpecs)
		if specs == nil {
			specs = map[string]string{}
		}
		o = append(o, member{"extra_specs", specs})
	}
	return o
}

// faultView is _get_fault: the details of a 500 only for admins.
func faultView(s *serverState, isAdmin bool) obj {
	f := s.fault
	o := obj{{"code", f.Code}, {"created", isotime(f.Created)}, {"message", f.Message}}
	if f.Details != "" && (isAdmin || f.Code != 500) {
		o = append(o, member{"details", f.Details})
	}
	return o
}

// rootDevice is the root_device_name a compute host sets when it builds
// the server: Nova's fake driver's "/dev/sda" (Berth's drivers attach no
// disks), None before a host.
func rootDevice(s *serverState) any {
	if s.host == "" {
		return nil
	}
	return "/dev/sda"
}

func nullable(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// showServerView is ViewBuilder.show. inDetail leaves host_status to
// the caller (detail adds it after every other member, as Nova's
// _add_host_status does).
func showServerView(c *reqCtx, s *serverState, o viewOpts, inDetail bool) obj {
	status := statusFromState(s.vmState, s.taskState)
	metadata := maps.Clone(s.metadata)
	if metadata == nil {
		metadata = map[string]string{}
	}
	v := obj{{"id", s.id}, {"name", s.name}, {"status", status}, {"tenant_id", s.projectID},
		{"user_id", s.userID}, {"metadata", metadata}, {"hostId", hostID(s.host, s.projectID)},
		{"image", imageView(c, s)}, {"flavor", flavorOfServer(c, s, o.extraSpecs)},
		{"created", isotime(s.created)}, {"updated", isotime(s.updated)},
		// Berth has no networks: no addresses, no access IPs.
		{"addresses", obj{}}, {"accessIPv4", ""}, {"accessIPv6", ""},
		{"links", serverLinks(c.baseURL, s.id)}, {"OS-DCF:diskConfig", "MANUAL"}}
	// Nova's detail list fills faults from the default cell's database
	// (InstanceList.fill_faults without a target cell): a server buried
	// in cell0 shows its fault in show but not in /servers/detail.
	if (status == "ERROR" || status == "DELETED") && s.fault != nil && !(inDetail && s.cell == etcdschema.Cell0) {
		v = append(v, member{"fault", faultView(s, o.isAdmin)})
	}
	switch status {
	case "ACTIVE", "BUILD", "REBUILD", "RESIZE", "VERIFY_RESIZE", "MIGRATING":
		v = append(v, member{"progress", 0})
	}
	// A naive datetime, which Nova's JSON writes in oslo's
	// PERFECT_TIME_FORMAT.
	var launched any
	if s.launchedAt != nil {
		launched = perfectTime(*s.launchedAt)
	}
	v = append(v, member{"OS-EXT-AZ:availability_zone", s.az}, member{"config_drive", ""},
		member{"key_name", nil}, member{"OS-SRV-USG:launched_at", launched},
		member{"OS-SRV-USG:terminated_at", nil})
	if o.extendedAttr {
		v = append(v, member{"OS-EXT-SRV-ATTR:host", orNull(s.host)},
			member{"OS-EXT-SRV-ATTR:instance_name", instanceName(s)},
			member{"OS-EXT-SRV-ATTR:hypervisor_hostname", orNull(s.node)})
		if c.v.atLeast(mvExtendedAttrs) {
			v = append(v, member{"OS-EXT-SRV-ATTR:reservation_id", s.reservationID},
				member{"OS-EXT-SRV-ATTR:launch_index", s.launchIndex},
				member{"OS-EXT-SRV-ATTR:hostname", hostname(s.name, s.id)},
				member{"OS-EXT-SRV-ATTR:kernel_id", ""}, member{"OS-EXT-SRV-ATTR:ramdisk_id", ""},
				member{"OS-EXT-SRV-ATTR:root_device_name", rootDevice(s)}, member{"OS-EXT-SRV-ATTR:user_data", nil})
		}
	}
	v = append(v, member{"OS-EXT-STS:task_state", orNull(s.taskState)},
		member{"OS-EXT-STS:vm_state", s.vmState}, member{"OS-EXT-STS:power_state", s.powerState},
		member{"os-extended-volumes:volumes_attached", []obj{}})
	if !inDetail && c.v.atLeast(mvHostStatus) && o.hostStatus != nil {
		v = append(v, member{"host_status", o.hostStatus[s.host]})
	}
	if c.v.atLeast(mvLocked) {
		v = append(v, member{"locked", false})
	}
	if c.v.atLeast(mvLockedReason) {
		v = append(v, member{"locked_reason", nil})
	}
	if c.v.atLeast(mvDescription) {
		v = append(v, member{"description", nullable(s.description)})
	}
	if c.v.atLeast(mvTags) {
		v = append(v, member{"tags", []any{}})
	}
	if c.v.atLeast(mvTrustedCerts) {
		v = append(v, member{"trusted_image_certificates", nil})
	}
	if c.v.atLeast(mvHostnameForNonAdmin) && !o.extendedAttr {
		v = append(v, member{"OS-EXT-SRV-ATTR:hostname", hostname(s.name, s.id)})
	}
	if o.serverGroups {
		groups := []any{}
		if s.group != "" {
			groups = append(groups, s.group)
		}
		v = append(v, member{"server_groups", groups})
	}
	return v
}
