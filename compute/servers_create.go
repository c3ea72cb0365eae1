package compute

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/quotas"
	"github.com/berth-project/berth/servers"
)

// POST /servers: ServersController.create and the checks of
// compute.API.create Berth makes, in Nova's order. See doc.go for the
// members Berth accepts and ignores and those it refuses.

// createRequest is the body read after its schema passed.
type createRequest struct {
	server   obj
	hints    obj
	minCount int
	maxCount int
	// forced: the host or node came from availability_zone
	// "zone:host[:node]" (Nova's force_hosts / force_nodes), which
	// the scheduler places on without running its filters; 2.74's
	// host / hypervisor_hostname go through them.
	forced bool
}

func (r *createRequest) str(k string) (string, bool) {
	v, ok := r.server.get(k)
	if !ok {
		return "", false
	}
	s, isStr := v.(string)
	return s, isStr
}

// intParam reads a positive_integer member (a JSON integer or digits).
func intParam(v any) int {
	switch t := v.(type) {
	case json.Number:
		n, _ := strconv.Atoi(t.String())
		return n
	case string:
		n, _ := strconv.Atoi(t)
		return n
	}
	return 0
}

// uuidList reads a hint that is a uuid or a list of them, canonical.
func uuidList(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{canonical(t)}
	case []any:
		out := make([]string, 0, len(t))
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, canonical(s))
			}
		}
		return out
	}
	return nil
}

// canonical spells a uuid Nova accepts (any case, braces, urn:uuid:) as
// Berth's records do; anything else is left for servers.ValidateHints.
func canonical(s string) string {
	if isCanonicalUUID(s) {
		return s // as most clients send it: nothing to build
	}
	if !isUUIDLike(s) {
		return s
	}
	v := strings.ReplaceAll(strings.ToLower(strings.Trim(strings.NewReplacer("urn:", "", "uuid:", "").Replace(s), "{}")), "-", "")
	return v[0:8] + "-" + v[8:12] + "-" + v[12:16] + "-" + v[16:20] + "-" + v[20:]
}

// passwordSymbols is utils.DEFAULT_PASSWORD_SYMBOLS.
var passwordSymbols = []string{"23456789", "ABCDEFGHJKLMNPQRSTUVWXYZ", "abcdefghijkmnopqrstuvwxyz"}

// allPasswordSymbols is every group at once, the filler's choice.
var allPasswordSymbols = strings.Join(passwordSymbols, "")

// generatePassword is utils.generate_password: 12 characters, at least
// one of each group, drawn from the system's randomness (Nova's
// random.SystemRandom) and shuffled.
func generatePassword() string {
	var r randomBytes
	b := make([]byte, 0, 12)
	for _, g := range passwordSymbols {
		b = append(b, g[r.below(len(g))])
	}
	for len(b) < 12 {
		b = append(b, allPasswordSymbols[r.below(len(allPasswordSymbols))])
	}
	for i := len(b) - 1; i > 0; i-- {
		j := r.below(i + 1)
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}

// randomBytes hands out crypto/rand bytes from one read of a few dozen:
// a password takes 23 uniform draws, and a crypto/rand.Int (with its big
// integers) for each was a visible part of a server create's CPU.
type randomBytes struct {
	buf  [64]byte
	next int
}

// below is a uniform integer in [0, n), 0 < n <= 256: a byte is drawn
// again while it falls in the last, partial run of n (rejection
// sampling), so no value is likelier than another.
func (r *randomBytes) below(n int) int {
	limit := 256 - 256%n
	for {
		if r.next == 0 || r.next == len(r.buf) {
			rand.Read(r.buf[:]) // never fails (crypto/rand, Go 1.24+)
			r.next = 0
		}
		b := int(r.buf[r.next])
		r.next++
		if b < limit {
			return b % n
		}
	}
}

// createServer is ServersController.create.
func (a *API) createServer(c *reqCtx) (int, any, error) {
	body := c.body.(obj)
	sv, _ := body.get("server")
	r := &createRequest{server: sv.(obj)}
	if h, ok := body.get("os:scheduler_hints"); ok {
		r.hints = h.(obj)
	} else if h, ok := body.get("OS-SCH-HNT:scheduler_hints"); ok {
		r.hints = h.(obj)
	}
	password, ok := r.str("adminPass")
	if !ok {
		password = generatePassword()
	}
	name, _ := r.str("name")
	var description *string
	if c.v.atLeast(mvDescription) {
		if d, ok := r.server.get("description"); ok && d != nil {
			s := d.(string)
			description = &s
		}
	} else {
		description = &name // Nova's display_description before 2.19
	}
	r.minCount = 1
	if v, ok := r.server.get("min_count"); ok {
		r.minCount = intParam(v)
	}
	r.maxCount = r.minCount
	if v, ok := r.server.get("max_count"); ok {
		r.maxCount = intParam(v)
	}
	if r.minCount > r.maxCount {
		return 0, nil, errBadRequest("min_count must be <= max_count")
	}
	// Nova checks the create rule here, with target the caller's own
	// project and user (and the zone asked for, which no default reads).
	if f := c.can(projectMemberOrAdmin("os_compute_api:servers:create"), c.creds.ProjectID); f != nil {
		return 0, nil, f
	}
	if r.maxCount > servers.MaxCount {
		// Nova's quota would refuse; Berth's limit is its own.
		return 0, nil, &fault{status: http.StatusForbidden, message: fmt.Sprintf(
			"Quota exceeded for instances: Requested %d, but already used 0 of %d instances", r.maxCount, servers.MaxCount)}
	}
	az, _ := r.str("availability_zone")
	// parse_availability_zone: "zone:host", "zone:host:node", "zone::node".
	var forcedHost, forcedNode string
	if strings.Contains(az, ":") {
		switch strings.Count(az, ":") {
		case 1:
			az, forcedHost, _ = strings.Cut(az, ":")
		case 2:
			if strings.Contains(az, "::") {
				az, forcedNode, _ = strings.Cut(az, "::")
			} else {
				parts := strings.Split(az, ":")
				az, forcedHost, forcedNode = parts[0], parts[1], parts[2]
			}
		default:
			return 0, nil, errBadRequest("Invalid input received: Unable to parse availability_zone")
		}
	}
	if forcedHost != "" || forcedNode != "" {
		if f := c.can(adminOnly("os_compute_api:servers:create:forced_host"), c.creds.ProjectID); f != nil {
			return 0, nil, f
		}
		if forcedHost != "" {
			var err error
			if az, err = a.zoneForForcedHost(c, az, forcedHost); err != nil {
				return 0, nil, err
			}
		}
	}
	host, node := forcedHost, forcedNode
	r.forced = host != "" || node != ""
	if c.v.atLeast(74) {
		rh, _ := r.str("host")
		rn, _ := r.str("hypervisor_hostname")
		if rh != "" || rn != "" {
			if f := c.can(adminOnly("compute:servers:create:requested_destination"), c.creds.ProjectID); f != nil {
				return 0, nil, f
			}
			if forcedHost != "" || forcedNode != "" {
				return 0, nil, errBadRequest("One mechanism with host and/or hypervisor_hostname and another " +
					"mechanism with zone:host:node are mutually exclusive.")
			}
			host, node = rh, rn
			r.forced = false
		}
	}
	imageID, f := r.imageRef()
	if f != nil {
		return 0, nil, f
	}
	if f := r.networks(c); f != nil {
		return 0, nil, f
	}
	return a.createChecked(c, r, name, description, az, host, node, imageID, password)
}

// zoneForForcedHost is _validate_host_availability_zone: the zone asked
// for when the forced host is in it (the default zone for a host in no
// zone), else no zone at all, so the host's own applies (Nova's fix of
// bug #1934770).
func (a *API) zoneForForcedHost(c *reqCtx, az, host string) (string, error) {
	zone, aggregated, err := a.servers.HostZone(c.r.Context(), host)
	if err != nil {
		return "", err
	}
	def := a.servers.DefaultZone()
	switch {
	case !aggregated && az == def, aggregated && az == zone, aggregated && az == def && zone == "":
		return az, nil
	}
	a.log.Warn("requested availability zone does not hold the forced host; ignoring the zone",
		"zone", az, "host", host, "request_id", c.requestID)
	return "", nil
}

// imageRef is _image_from_req_data: the image id, "" for a server
// booted from a block device mapping only (an image source's uuid is
// Berth's image then). A block device mapping Berth
// cannot honour (a volume, a snapshot) is Nova's answer to one that does
// not exist.
func (r *createRequest) imageRef() (string, *fault) {
	ref, _ := r.str("imageRef")
	var bdms []any
	for _, k := range []string{"block_device_mapping", "block_device_mapping_v2"} {
		if v, ok := r.server.get(k); ok {
			bdms = append(bdms, v.([]any)...)
		}
	}
	for _, b := range bdms {
		o, _ := b.(obj)
		src, _ := o.get("source_type")
		id, _ := o.get("uuid")
		ids, _ := id.(string)
		if vol, ok := o.get("volume_id"); ok {
			return "", errBadRequest(fmt.Sprintf("Volume %v could not be found.", vol))
		}
		switch src {
		case "volume":
			return "", errBadRequest("Volume " + ids + " could not be found.")
		case "snapshot":
			return "", errBadRequest("Snapshot " + ids + " could not be found.")
		case "image":
			if ref == "" {
				ref = ids
			}
		}
	}
	switch {
	case ref != "":
		// The schema has made it a uuid.
		return canonical(ref), nil
	case len(bdms) > 0:
		return "", nil
	}
	return "", errBadRequest("Missing imageRef attribute")
}

// networks is _process_networks_for_create: "none" and "auto" are what
// Berth has (no networks); a network or port named is one that does not
// exist.
func (r *createRequest) networks(c *reqCtx) *fault {
	v, ok := r.server.get("networks")
	if !ok {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil // "none" or "auto"
	}
	for _, n := range list {
		o := n.(obj)
		if port, ok := o.get("port"); ok && port != nil {
			return errBadRequest(fmt.Sprintf("Port id %v could not be found.", port))
		}
		if id, ok := o.get("uuid"); ok {
			if s, _ := id.(string); !isUUIDLike(s) && !c.v.atLeast(37) {
				return errBadRequest("Bad networks format: network uuid is not in proper format (" + s + ")")
			}
			return errBadRequest(fmt.Sprintf("Network %v could not be found.", id))
		}
	}
	return nil
}

// recheckAttempts bounds how often one create checks again because its
// flavor or image changed between its check and its store: each round
// another writer committed, so only a flavor or image rewritten without
// pause runs out.
const recheckAttempts = 16

// createChecked is compute.API.create's checks and the hand-off. The
// checks may use the flavor and image as a create last read them
// (flavorStore.recent, ImageCache); the hand-off stores the servers only
// while both records are unchanged, so a flavor or image changed or
// deleted meanwhile makes the create check again over fresh reads, and
// its answer is the one a create reading them both would give.
func (a *API) createChecked(c *reqCtx, r *createRequest, name string, description *string, az, host, node, imageID, password string) (int, any, error) {
	for attempt := 0; attempt < recheckAttempts; attempt++ {
		fresh := attempt > 0
		if fresh {
			if cache, ok := a.images.(ImageCache); ok && imageID != "" {
				cache.ForgetImage(imageID)
			}
		}
		status, body, err := a.createOnce(c, r, name, description, az, host, node, imageID, password, fresh)
		if !errors.Is(err, servers.ErrCheckedRecordChanged) && !errors.Is(err, errRecheck) {
			return status, body, err
		}
	}
	a.log.Warn("a create's flavor or image kept changing while it was stored; gave up", "request_id", c.requestID)
	return 0, nil, &fault{status: http.StatusConflict, message: "The flavor or image of the request kept changing; try again."}
}

// errRecheck is a refusal decided on a flavor or image as a create last
// read it: it may be stale, and only a fresh read may refuse.
var errRecheck = errors.New("refused on a remembered flavor or image: check again over fresh reads")

// createOnce is one round of createChecked; fresh reads the flavor and
// image from etcd (after their store found them changed).
func (a *API) createOnce(c *reqCtx, r *createRequest, name string, description *string, az, host, node, imageID, password string,
	fresh bool) (int, any, error) {
	ctx := c.r.Context()
	flavorRef := fmt.Sprint(mustGet(r.server, "flavorRef"))
	flavorID := flavorRef[strings.LastIndex(flavorRef, "/")+1:]
	lookup := a.flavors.recent
	if fresh {
		lookup = a.flavors.get
	}
	stored, err := lookup(ctx, flavorID)
	if err != nil {
		var f *fault
		if errors.As(err, &f) {
			return 0, nil, errBadRequest("Flavor " + flavorID + " could not be found.")
		}
		return 0, nil, err
	}
	flavor := stored.Flavor
	if key, ok := r.str("key_name"); ok && key != "" {
		return 0, nil, errBadRequest("Invalid key_name provided.") // Berth keeps no key pairs
	}
	if v, ok := r.server.get("security_groups"); ok {
		for _, g := range v.([]any) {
			if n, _ := g.(obj).get("name"); n != nil && n != "default" {
				return 0, nil, errBadRequest(fmt.Sprintf("Security group %v not found.", n))
			}
		}
	}
	checked := []servers.CheckedRecord{{Key: stored.key, ModRevision: stored.modRev}}
	var image *etcdschema.BootImage
	if imageID != "" {
		if a.images == nil {
			return 0, nil, errBadRequest("Can not find requested image")
		}
		im, err := a.images.Image(ctx, c.creds, imageID)
		// The flavor and image may be as a create last read them: only
		// their records as they are now may refuse the request.
		refuse := func(f *fault) (int, any, error) {
			if !fresh {
				return 0, nil, errRecheck
			}
			return 0, nil, f
		}
		switch {
		case errors.Is(err, ErrImageNotFound):
			return refuse(errBadRequest("Can not find requested image"))
		case err != nil:
			return 0, nil, fmt.Errorf("read image %s: %w", imageID, err)
		}
		if flavor.RAMMB < im.MinRAMMB {
			return refuse(errBadRequest("Flavor's memory is too small for requested image."))
		}
		if flavor.DiskGB != 0 && flavor.DiskGB < im.MinDiskGB {
			return refuse(errBadRequest(fmt.Sprintf("Flavor's disk is smaller than the minimum size specified in image "+
				"metadata. Flavor disk is %d bytes, minimum size is %d bytes.", flavor.DiskGB<<30, im.MinDiskGB<<30)))
		}
		image = &etcdschema.BootImage{ID: im.ID, Name: im.Name, Command: im.Command}
		if im.Key != "" {
			checked = append(checked, servers.CheckedRecord{Key: im.Key, ModRevision: im.ModRevision})
		}
	}
	hints := etcdschema.SchedulerHints{}
	if g, ok := r.hints.get("group"); ok {
		hints.Group = canonical(g.(string))
	}
	if v, ok := r.hints.get("same_host"); ok {
		hints.SameHost = uuidList(v)
	}
	if v, ok := r.hints.get("different_host"); ok {
		hints.DifferentHost = uuidList(v)
	}
	metadata := map[string]string{}
	if m, ok := r.server.get("metadata"); ok {
		for _, kv := range m.(obj) {
			metadata[kv.k] = kv.v.(string)
		}
	}
	if len(metadata) == 0 {
		metadata = nil
	}
	if f := a.checkPlacement(c, az, hints, host, node); f != nil {
		return 0, nil, f
	}
	project, user := c.creds.ProjectID, c.creds.UserID
	res, err := a.servers.Create(ctx, servers.CreateRequest{Name: name, Flavor: flavor, Count: r.maxCount, MinCount: r.minCount,
		ProjectID: project, UserID: user, AvailabilityZone: az, Hints: hints, Host: host, Node: node,
		Forced: r.forced, RequestID: c.requestID, Image: image, Metadata: metadata, Description: description,
		Checked: checked})
	var hint *servers.HintError
	var over *quotas.OverQuotaError
	switch {
	case errors.As(err, &hint):
		return 0, nil, hintFault(hint)
	case errors.As(err, &over):
		return 0, nil, &fault{status: http.StatusForbidden, message: over.Message}
	case errors.Is(err, servers.ErrGroupDeleted):
		return 0, nil, errBadRequest("Instance group " + hints.Group + " could not be found.")
	case err != nil:
		return 0, nil, err
	}
	if v, ok := r.server.get("return_reservation_id"); ok {
		if b, _ := boolValue(v); b {
			return http.StatusAccepted, obj{{"reservation_id", res.ID}}, nil
		}
	}
	id := res.BuildRequests[0].InstanceUUID
	groups := []obj{{{"name", "default"}}}
	if v, ok := r.server.get("security_groups"); ok {
		groups = nil
		for _, g := range v.([]any) {
			groups = append(groups, g.(obj))
		}
	}
	links := serverLinks(c.baseURL, id)
	c.header.Set("Location", urlJoin(c.baseURL, "servers", id))
	return http.StatusAccepted, obj{{"server", obj{{"id", id}, {"links", links}, {"OS-DCF:diskConfig", "MANUAL"},
		{"security_groups", groups}, {"adminPass", password}}}}, nil
}

func mustGet(o obj, k string) any {
	v, _ := o.get(k)
	if n, ok := v.(json.Number); ok {
		return n.String()
	}
	return v
}

// boolValue is a parameter_types.boolean value as Nova reads it.
func boolValue(v any) (bool, bool) {
	switch t := v.(type) {
	case bool:
		return t, true
	case string:
		return boolFromString(t)
	}
	return false, false
}

func hintFault(h *servers.HintError) *fault {
	return errBadRequest("Invalid input for field/attribute " + h.Hint + ". Value: " + h.Value + ". " +
		pyRepr(h.Value) + " is not a 'uuid'")
}

// checkPlacement is compute.API.create's zone check, its group lookup
// and its requested-destination check, in Nova's words.
func (a *API) checkPlacement(c *reqCtx, az string, hints etcdschema.SchedulerHints, host, node string) *fault {
	err := a.servers.CheckPlacement(c.r.Context(), az, hints)
	var hint *servers.HintError
	var zone *servers.ZoneError
	var group *servers.GroupError
	switch {
	case errors.As(err, &hint):
		return hintFault(hint)
	case errors.As(err, &zone):
		return errBadRequest("The requested availability zone is not available")
	case errors.As(err, &group):
		return errBadRequest("Instance group " + group.Group + " could not be found.")
	case err != nil:
		a.log.Error("check a create's zone and group", "request_id", c.requestID, "error", err)
		return &fault{status: http.StatusServiceUnavailable, message: "The state store could not be read or written; try again."}
	}
	err = a.servers.CheckRequestedHost(c.r.Context(), host, node)
	var he *servers.HostError
	switch {
	case errors.As(err, &he) && he.Host != "":
		return errBadRequest("Compute host " + he.Host + " could not be found.")
	case errors.As(err, &he):
		return errBadRequest("Compute host " + he.Node + " could not be found.")
	case err != nil:
		a.log.Error("check a create's host", "request_id", c.requestID, "error", err)
		return &fault{status: http.StatusServiceUnavailable, message: "The state store could not be read or written; try again."}
	}
	return nil
}
