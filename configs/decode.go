package configs

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdcluster"
	"github.com/berth-project/berth/internal/gctune"
)

// Load reads and parses one config file. A read failure is a plain wrapped
// error; everything wrong inside the file is a *DiagnosticsError.
func Load(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(src, path)
}

// Parse decodes src (HCL native syntax) into a Config with defaults applied
// and every value checked. filename appears in diagnostics. The error, if
// any, is a *DiagnosticsError listing every problem found.
func Parse(src []byte, filename string) (*Config, error) {
	f, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, diagsError(filename, diags)
	}
	// Decode into the raw, all-optional shape first: pointers tell unset
	// from zero, so that "max_attempts = 0" is an error rather than a
	// default, and the blocks keep their bodies for source ranges.
	var raw rawFile
	diags = append(diags, nameTypeErrors(f.Body, gohcl.DecodeBody(f.Body, nil, &raw))...)
	if diags.HasErrors() {
		// Checking values of a body that failed to decode would report
		// the same mistake twice.
		return nil, diagsError(filename, diags)
	}
	d := &decoder{filename: filename, def: Defaults()}
	cfg := d.config(&raw)
	diags = append(diags, d.diags...)
	if err := diagsError(filename, diags); err != nil {
		return nil, err
	}
	return cfg, nil
}

// nameTypeErrors adds the attribute's name to gohcl's type errors, which
// say only "a number is required": the position alone makes the reader
// count columns.
func nameTypeErrors(body hcl.Body, diags hcl.Diagnostics) hcl.Diagnostics {
	type named struct {
		path string
		expr hcl.Range
	}
	var attrs []named
	var walk func(b *hclsyntax.Body, path string)
	walk = func(b *hclsyntax.Body, path string) {
		for name, a := range b.Attributes {
			attrs = append(attrs, named{path + name, a.Expr.Range()})
		}
		for _, blk := range b.Blocks {
			walk(blk.Body, path+blk.Type+".")
		}
	}
	sb, ok := body.(*hclsyntax.Body)
	if !ok {
		return diags
	}
	walk(sb, "")
	for _, d := range diags {
		if d.Summary != "Unsuitable value type" || d.Subject == nil {
			continue
		}
		for _, a := range attrs {
			if a.expr.ContainsPos(d.Subject.Start) {
				d.Detail = fmt.Sprintf("%s: %s.", a.path, strings.TrimPrefix(d.Detail, "Unsuitable value: "))
				// Point at the whole value, as this package's own
				// diagnostics do, not inside its quotes.
				r := a.expr
				d.Subject = &r
				break
			}
		}
	}
	return diags
}

// ---- from raw to typed, with defaults and checks ----------------------

// decoder turns the raw shape into a Config, collecting a diagnostic for
// every bad value instead of stopping at the first.
type decoder struct {
	filename string
	def      *Config
	diags    hcl.Diagnostics
}

func (d *decoder) config(r *rawFile) *Config {
	c := &Config{Filename: d.filename}
	c.Etcd = d.etcd(r.Etcd)
	c.Log = d.log(r.Log)
	c.Runtime = d.runtime(r.Runtime)
	c.Status = d.status(r.Status)
	c.HTTP = d.http(r.HTTP)
	c.TLS = d.processTLS(r.TLS)
	c.DefaultAvailabilityZone = d.zone(r.Body, "default_availability_zone", r.DefaultAvailabilityZone, d.def.DefaultAvailabilityZone)
	if r.API != nil {
		c.API = &API{
			Bind:                  d.bind(r.API.Body, "bind", r.API.Bind, d.def.API.Bind),
			Auth:                  d.enum(r.API.Body, "auth", r.API.Auth, d.def.API.Auth, AuthNoAuth, AuthKeystone),
			Quota:                 d.quota(r.API.Quota),
			AllowResizeToSameHost: d.boolean(r.API.AllowResizeToSameHost, d.def.API.AllowResizeToSameHost),
			ShelvedOffloadTime: d.count(r.API.Body, "shelved_offload_time", r.API.ShelvedOffloadTime,
				d.def.API.ShelvedOffloadTime, -1, "-1 is never, 0 at once"),
			ResizeConfirmWindow: d.duration(r.API.Body, "resize_confirm_window", r.API.ResizeConfirmWindow,
				d.def.API.ResizeConfirmWindow, 0, "\"0s\" turns automatic confirmation off"),
			declRange: r.API.DefRange,
		}
	}
	if r.Placement != nil {
		c.Placement = d.placement(r.Placement)
	}
	if r.Scheduler != nil {
		c.Scheduler = d.scheduler(r.Scheduler)
	}
	if r.Superconductor != nil {
		s := r.Superconductor
		c.Superconductor = &Superconductor{
			Workers:       int(d.count(s.Body, "workers", s.Workers, int64(d.def.Superconductor.Workers), 1, "nothing would lease build requests")),
			LeaseTTL:      d.leaseTTL(s.Body, "lease_ttl", s.LeaseTTL, d.def.Superconductor.LeaseTTL),
			SelectTimeout: d.duration(s.Body, "select_timeout", s.SelectTimeout, d.def.Superconductor.SelectTimeout, 100*time.Millisecond, "a scheduler needs time to answer"),
			Ranking:       d.ranking(s.Body, s.RankGrace, s.HolderIdleAfter, s.StealAfter, d.def.Superconductor.Ranking),
			declRange:     s.DefRange,
		}
	}
	if r.Conductor != nil {
		c.Conductor = d.conductor(r.Conductor)
	}
	if r.Agent != nil {
		c.Agent = d.agent(r.Agent)
	}
	if r.Identity != nil {
		c.Identity = d.identity(r.Identity)
	}
	if r.Image != nil {
		c.Image = d.image(r.Image, c.Identity != nil)
	}
	d.keystoneNeedsIdentity(c, r)
	return c
}

// image decodes the image block; auth = "keystone" (the default) needs
// the file's identity block, whose directory checks the tokens.
func (d *decoder) image(r *rawImage, hasIdentity bool) *Image {
	def := DefaultImage()
	img := &Image{
		Bind:      d.bind(r.Body, "bind", r.Bind, def.Bind),
		Auth:      d.enum(r.Body, "auth", r.Auth, def.Auth, AuthKeystone, AuthNoAuth),
		declRange: r.DefRange,
	}
	if img.Auth == AuthKeystone && !hasIdentity {
		subject := attrRange(r.Body, "auth")
		if r.Auth == nil {
			subject = r.DefRange.Ptr()
		}
		d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Image API tokens need an identity block",
			Detail: "auth = \"keystone\" (the default) checks X-Auth-Token with this file's identity { ... } block (its users, projects and roles); " +
				"add one, or set auth = \"noauth\" to let every caller act as an admin (berth dev and tests only).",
			Subject: subject})
	}
	return img
}

// keystoneNeedsIdentity: auth = "keystone" checks tokens against the
// file's identity block (its users' roles), so the block must be there,
// even on a server that does not serve the identity API (bind = "").
func (d *decoder) keystoneNeedsIdentity(c *Config, r *rawFile) {
	if c.Identity != nil {
		return
	}
	const detail = "auth = \"keystone\" checks tokens with the identity block's users and roles: add an identity block (with bind = \"\" if another server serves the identity API), or use another auth."
	if c.API != nil && c.API.Auth == AuthKeystone {
		d.bad(r.API.Body, "auth", "No identity block", detail)
	}
	if c.Placement != nil && c.Placement.Auth == AuthKeystone {
		d.bad(r.Placement.Body, "auth", "No identity block", detail)
	}
}

func (d *decoder) etcd(r *rawEtcd) Etcd {
	def := d.def.Etcd
	if r == nil {
		return def
	}
	e := Etcd{
		Prefix:      d.str(r.Prefix, def.Prefix),
		DialTimeout: d.duration(r.Body, "dial_timeout", r.DialTimeout, def.DialTimeout, time.Millisecond, "a zero timeout never connects"),
		Username:    d.str(r.Username, ""),
		Password:    d.str(r.Password, ""),
		declRange:   r.DefRange,
	}
	if r.Prefix != nil && (!strings.HasPrefix(e.Prefix, "/") || e.Prefix == "/" || strings.HasSuffix(e.Prefix, "/")) {
		d.bad(r.Body, "prefix", "Invalid prefix",
			fmt.Sprintf("prefix must start with \"/\" and not end with one, like %q; got %q.", def.Prefix, e.Prefix))
	}
	if e.Password != "" && e.Username == "" {
		d.bad(r.Body, "password", "Password without username",
			"etcd authenticates a user by name; set username too.")
	}
	if r.Endpoints != nil {
		e.Endpoints = *r.Endpoints
		if len(e.Endpoints) == 0 {
			d.bad(r.Body, "endpoints", "Empty endpoints",
				"List at least one etcd client URL, or remove endpoints to run embedded etcd.")
		}
		for _, ep := range e.Endpoints {
			if strings.TrimSpace(ep) == "" {
				d.bad(r.Body, "endpoints", "Empty endpoint", "Every endpoint must be an etcd client URL like \"http://10.0.0.1:2379\".")
				break
			}
		}
	}
	if r.TLS != nil {
		e.TLS = d.tls(r.TLS)
	}
	switch {
	case r.Embedded != nil && r.Endpoints != nil:
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Both embedded and endpoints",
			Detail: fmt.Sprintf("endpoints (line %d) name an external cluster and embedded starts a new one; keep one of them.",
				attrRange(r.Body, "endpoints").Start.Line),
			Subject: r.Embedded.DefRange.Ptr(),
		})
	case r.Embedded != nil:
		e.Embedded = d.embedded(r.Embedded, e.TLS)
	case r.Endpoints == nil && e.TLS != nil:
		// The default member, serving the tls block's files over https.
		e.Embedded = d.embedded(&rawEmbedded{Body: hcl.EmptyBody()}, e.TLS)
	case r.Endpoints == nil:
		// Neither: the design's default is the embedded single member.
		e.Embedded = def.Embedded
	}
	if e.Embedded != nil && r.Username != nil {
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Auth with embedded etcd",
			Detail:   "Embedded etcd serves without auth on its client_url; username and password apply only to external endpoints.",
			Subject:  attrRange(r.Body, "username"),
		})
	}
	if e.Embedded != nil && r.TLS != nil {
		d.memberTLS(r.TLS, e.TLS)
	}
	return e
}

// memberTLS checks the tls block of an embedded member: its certificate
// serves the client and peer URLs, and ca_file is the CA every client and
// peer certificate must chain to (client certificate auth), so all three
// are needed.
func (d *decoder) memberTLS(r *rawTLS, t *TLS) {
	for _, f := range []struct{ name, v string }{{"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"ca_file", t.CAFile}} {
		if f.v == "" {
			d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing " + f.name,
				Detail: "An embedded member with tls serves its client and peer URLs with cert_file and key_file and " +
					"requires client and peer certificates chaining to ca_file; set all three.",
				Subject: r.DefRange.Ptr()})
		}
	}
}

func (d *decoder) tls(r *rawTLS) *TLS {
	t := &TLS{CAFile: d.str(r.CAFile, ""), CertFile: d.str(r.CertFile, ""), KeyFile: d.str(r.KeyFile, ""), body: r.Body}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		d.bad(r.Body, "cert_file", "Certificate without key", "cert_file needs key_file: a client certificate is useless without its private key.")
	case t.KeyFile != "" && t.CertFile == "":
		d.bad(r.Body, "key_file", "Key without certificate", "key_file needs cert_file.")
	}
	return t
}

func (d *decoder) embedded(r *rawEmbedded, t *TLS) *Embedded {
	def := d.def.Etcd.Embedded
	scheme := "http"
	if t != nil {
		scheme = "https"
	}
	m := &Embedded{
		tls:                     t,
		DataDir:                 d.str(r.DataDir, def.DataDir),
		ClientURL:               d.memberURL(r.Body, "client_url", r.ClientURL, def.ClientURL, scheme),
		PeerURL:                 d.memberURL(r.Body, "peer_url", r.PeerURL, def.PeerURL, scheme),
		Name:                    d.str(r.Name, def.Name),
		AutoCompactionRetention: d.duration(r.Body, "auto_compaction_retention", r.AutoCompactionRetention, def.AutoCompactionRetention, time.Second, "without compaction etcd refuses writes once it reaches its quota"),
		QuotaBackendBytes:       d.count(r.Body, "quota_backend_bytes", r.QuotaBackendBytes, def.QuotaBackendBytes, 0, "0 means etcd's own default"),
		InitialCluster:          d.str(r.InitialCluster, def.InitialCluster),
		InitialClusterState:     d.enum(r.Body, "initial_cluster_state", r.InitialClusterState, def.InitialClusterState, ClusterStateNew, ClusterStateExisting),
		LogLevel:                d.enum(r.Body, "log_level", r.LogLevel, def.LogLevel, embedetcd.LogLevels...),
		HeartbeatInterval:       d.duration(r.Body, "heartbeat_interval", r.HeartbeatInterval, def.HeartbeatInterval, time.Millisecond, "etcd counts raft ticks in milliseconds"),
		ElectionTimeout:         d.duration(r.Body, "election_timeout", r.ElectionTimeout, def.ElectionTimeout, time.Millisecond, "etcd counts it in milliseconds"),
	}
	if r.InitialCluster != nil {
		d.initialCluster(r.Body, m)
	}
	d.raftTiming(r, m)
	if m.DataDir == "" {
		d.bad(r.Body, "data_dir", "Empty data_dir", "Embedded etcd needs a directory for its data.")
	}
	if r.Name != nil && m.Name == "" {
		d.bad(r.Body, "name", "Empty name", "The member name appears in etcd's cluster configuration; leave it out to use \"berth\".")
	}
	return m
}

// raftTiming checks heartbeat_interval and election_timeout as etcd
// would at start-up, so that a bad pair is refused with the file's line:
// whole milliseconds, an election timeout of at least five heartbeats
// (fewer and a follower calls elections while a healthy leader's beat is
// merely late) and at most etcd's 50 s.
func (d *decoder) raftTiming(r *rawEmbedded, m *Embedded) {
	for _, f := range []struct {
		name string
		set  *string
		v    time.Duration
	}{{"heartbeat_interval", r.HeartbeatInterval, m.HeartbeatInterval}, {"election_timeout", r.ElectionTimeout, m.ElectionTimeout}} {
		if f.set != nil && f.v >= time.Millisecond && f.v%time.Millisecond != 0 {
			d.bad(r.Body, f.name, "Invalid "+f.name, fmt.Sprintf("%s must be whole milliseconds (etcd counts them so); got %s.", f.name, f.v))
		}
	}
	if r.HeartbeatInterval == nil && r.ElectionTimeout == nil {
		return
	}
	name := "election_timeout"
	if r.ElectionTimeout == nil {
		name = "heartbeat_interval"
	}
	switch {
	case m.ElectionTimeout < 5*m.HeartbeatInterval:
		d.bad(r.Body, name, "election_timeout too short for heartbeat_interval",
			fmt.Sprintf("election_timeout (%s) must be at least 5 times heartbeat_interval (%s): with fewer beats per timeout a follower calls elections while a healthy leader is only late; etcd refuses to start so.",
				m.ElectionTimeout, m.HeartbeatInterval))
	case m.ElectionTimeout > 50*time.Second:
		d.bad(r.Body, "election_timeout", "Invalid election_timeout",
			fmt.Sprintf("election_timeout must be at most 50s (etcd's limit); got %s.", m.ElectionTimeout))
	}
}

// initialCluster checks "name=http://host:port,..." and that it names this
// member with its own peer_url, which etcd would otherwise refuse with a
// message about a cluster ID mismatch only after the member starts.
func (d *decoder) initialCluster(b hcl.Body, m *Embedded) {
	const name = "initial_cluster"
	if strings.TrimSpace(m.InitialCluster) == "" {
		d.bad(b, name, "Empty initial_cluster",
			"initial_cluster lists every member as \"name=http://host:2380,...\"; leave it out for a cluster of this member alone.")
		return
	}
	err := etcdcluster.Check(m.InitialCluster, m.Name, m.PeerURL)
	var malformed *etcdcluster.MalformedError
	var dup *etcdcluster.DuplicateError
	var mismatch *etcdcluster.PeerMismatchError
	switch {
	case err == nil:
	case errors.As(err, &malformed):
		d.bad(b, name, "Invalid initial_cluster",
			fmt.Sprintf("Each member is name=%[1]s://host:port (%[1]s, as this member's peer_url: peers talk TLS when the etcd block has tls, plain HTTP otherwise), like \"etcd-1=%[1]s://10.0.0.11:2380\"; got %[2]q.", malformed.Scheme, malformed.Entry))
	case errors.As(err, &dup):
		d.bad(b, name, "Duplicate member in initial_cluster", fmt.Sprintf("Member %q is listed twice.", dup.Name))
	case errors.As(err, &mismatch):
		d.bad(b, name, "initial_cluster disagrees with peer_url",
			fmt.Sprintf("initial_cluster gives this member (%q) the peer URL %q, but peer_url is %q; they must be the same.", mismatch.Name, mismatch.Listed, mismatch.Own))
	default:
		d.bad(b, name, "This member is not in initial_cluster",
			fmt.Sprintf("initial_cluster must list this member by its name %q (set name = ... to match one of its entries).", m.Name))
	}
}

func (d *decoder) status(r *rawStatus) Status {
	def := d.def.Status
	if r == nil {
		return def
	}
	if r.Bind == nil {
		// An empty block would silently serve nothing.
		d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Missing bind",
			Detail:  "A status block serves /healthz, /readyz and /metrics on bind = \"host:port\"; set it, or remove the block to serve none.",
			Subject: r.DefRange.Ptr()})
		return def
	}
	return Status{Bind: d.bind(r.Body, "bind", r.Bind, def.Bind)}
}

// http reads the limits of every HTTP listener. The timeouts must keep
// their order: a request head within the whole request's time, and the
// answer's write deadline past the read deadline, so that a handler whose
// context ReadTimeout ended (net/http does that) can still answer.
func (d *decoder) http(r *rawHTTP) HTTP {
	def := d.def.HTTP
	if r == nil {
		return def
	}
	h := HTTP{
		ReadHeaderTimeout: d.duration(r.Body, "read_header_timeout", r.ReadHeaderTimeout, def.ReadHeaderTimeout, 100*time.Millisecond, "a client needs time to send its request head"),
		ReadTimeout: d.duration(r.Body, "read_timeout", r.ReadTimeout, def.ReadTimeout, 15*time.Second,
			"it ends the context of a request still running, and the compute API's service update waits up to 10s for an agent"),
		WriteTimeout: d.duration(r.Body, "write_timeout", r.WriteTimeout, def.WriteTimeout, 15*time.Second, "slow answers would be cut off; see read_timeout"),
		IdleTimeout:  d.duration(r.Body, "idle_timeout", r.IdleTimeout, def.IdleTimeout, time.Second, "keep-alive connections would be closed between a client's requests"),
		RequestTimeout: d.duration(r.Body, "request_timeout", r.RequestTimeout, def.RequestTimeout, 12*time.Second,
			"the compute API's service update waits up to 10s for an agent"),
		MaxHeaderBytes: d.count(r.Body, "max_header_bytes", r.MaxHeaderBytes, def.MaxHeaderBytes, 4096, "a request head with a token and the usual headers needs more"),
		MaxBodyBytes:   d.count(r.Body, "max_body_bytes", r.MaxBodyBytes, def.MaxBodyBytes, 64<<10, "the identity and compute APIs' requests need up to 64 KiB"),
		MaxConnections: d.count(r.Body, "max_connections", r.MaxConnections, def.MaxConnections, 1, "the listener would serve no one"),
	}
	switch {
	case (r.ReadHeaderTimeout != nil || r.ReadTimeout != nil) && h.ReadHeaderTimeout > h.ReadTimeout:
		at := "read_header_timeout"
		if r.ReadHeaderTimeout == nil {
			at = "read_timeout"
		}
		d.bad(r.Body, at, "Invalid "+at,
			fmt.Sprintf("read_header_timeout (%s) must be at most read_timeout (%s): the head is part of the request.", h.ReadHeaderTimeout, h.ReadTimeout))
	case (r.RequestTimeout != nil || r.ReadTimeout != nil) && h.RequestTimeout > h.ReadTimeout:
		at := "request_timeout"
		if r.RequestTimeout == nil {
			at = "read_timeout"
		}
		d.bad(r.Body, at, "Invalid "+at,
			fmt.Sprintf("request_timeout (%s) must be at most read_timeout (%s): Go ends a request's context at read_timeout anyway.", h.RequestTimeout, h.ReadTimeout))
	case (r.ReadTimeout != nil || r.WriteTimeout != nil) && h.WriteTimeout < h.ReadTimeout:
		at := "write_timeout"
		if r.WriteTimeout == nil {
			at = "read_timeout"
		}
		d.bad(r.Body, at, "Invalid "+at,
			fmt.Sprintf("write_timeout (%s) must be at least read_timeout (%s): a request whose context read_timeout ended must still be able to answer.", h.WriteTimeout, h.ReadTimeout))
	}
	return h
}

func (d *decoder) log(r *rawLog) Log {
	def := d.def.Log
	if r == nil {
		return def
	}
	return Log{
		Level:  d.enum(r.Body, "level", r.Level, def.Level, LogLevels...),
		Format: d.enum(r.Body, "format", r.Format, def.Format, LogFormatText, LogFormatJSON),
	}
}

// runtime decodes the runtime block: gc_percent as GOGC, memory_limit
// as GOMEMLIMIT spells a size (package gctune).
func (d *decoder) runtime(r *rawRuntime) gctune.Policy {
	def := d.def.Runtime
	if r == nil {
		return def
	}
	p := gctune.Policy{
		GCPercent: int(d.count(r.Body, "gc_percent", r.GCPercent, int64(def.GCPercent), gctune.MinGCPercent,
			"below it the collector runs almost without pause")),
		MemoryLimit: def.MemoryLimit,
	}
	if r.GCPercent != nil && *r.GCPercent > 1_000_000 {
		d.bad(r.Body, "gc_percent", "Invalid gc_percent",
			fmt.Sprintf("gc_percent must be at most 1000000 (the heap may grow this percent past the live heap between collections); got %d.", *r.GCPercent))
	}
	if r.MemoryLimit != nil {
		n, err := gctune.ParseSize(*r.MemoryLimit)
		if err != nil {
			d.bad(r.Body, "memory_limit", "Invalid memory_limit", "memory_limit "+err.Error()+".")
		}
		p.MemoryLimit = n
	}
	return p
}

func (d *decoder) placement(r *rawPlacement) *Placement {
	def := d.def.Placement
	p := &Placement{
		Bind: d.bind(r.Body, "bind", r.Bind, def.Bind),
		Auth: d.enum(r.Body, "auth", r.Auth, def.Auth, AuthNoAuth, AuthTokens, AuthKeystone),
		CandidateWorkLimit: d.count(r.Body, "candidate_work_limit", r.CandidateWorkLimit, def.CandidateWorkLimit, 1000,
			"a search over a few nested trees tries thousands of combinations"),
		declRange: r.DefRange,
	}
	seen := map[string]hcl.Range{}
	for _, t := range r.Tokens {
		if strings.TrimSpace(t.Token) == "" {
			d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Empty token",
				Detail: "A token block's label is the secret clients send as X-Auth-Token; it cannot be empty.", Subject: t.LabelRange.Ptr()})
			continue
		}
		if prev, dup := seen[t.Token]; dup {
			d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Duplicate token",
				Detail: fmt.Sprintf("This token is already defined at %s; one token stands for one identity.", prev), Subject: t.LabelRange.Ptr()})
			continue
		}
		seen[t.Token] = t.LabelRange
		tok := Token{Token: t.Token, ProjectID: d.str(t.ProjectID, ""), UserID: d.str(t.UserID, ""),
			SystemScope: d.enum(t.Body, "system_scope", t.SystemScope, "", "", "all")}
		if t.Roles != nil {
			tok.Roles = *t.Roles
		}
		p.Tokens = append(p.Tokens, tok)
	}
	switch {
	case p.Auth == AuthTokens && len(r.Tokens) == 0:
		d.bad(r.Body, "auth", "No tokens",
			"auth = \"tokens\" needs at least one token \"<secret>\" { ... } block, or no client could authenticate.")
	case p.Auth != AuthTokens && len(r.Tokens) > 0:
		d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Tokens without auth = \"tokens\"",
			Detail:  fmt.Sprintf("With auth = %q token blocks are ignored; set auth = \"tokens\" or remove them.", p.Auth),
			Subject: r.Tokens[0].DefRange.Ptr()})
	}
	return p
}

func (d *decoder) scheduler(r *rawScheduler) *Scheduler {
	def := d.def.Scheduler
	s := &Scheduler{
		Bind:                        d.bind(r.Body, "bind", r.Bind, def.Bind),
		MaxAttempts:                 int(d.count(r.Body, "max_attempts", r.MaxAttempts, int64(def.MaxAttempts), 1, "it counts the first try")),
		HostSubsetSize:              int(d.count(r.Body, "host_subset_size", r.HostSubsetSize, int64(def.HostSubsetSize), 1, "the pick is made among this many best hosts")),
		MaxPlacementResults:         int(d.count(r.Body, "max_placement_results", r.MaxPlacementResults, int64(def.MaxPlacementResults), 1, "placement would return no candidates")),
		ShuffleBestSameWeighedHosts: d.boolean(r.ShuffleBestSameWeighedHosts, def.ShuffleBestSameWeighedHosts),
		TrackInstanceChanges:        d.boolean(r.TrackInstanceChanges, def.TrackInstanceChanges),
		HostCapacityMetrics:         d.boolean(r.HostCapacityMetrics, def.HostCapacityMetrics),
		EnabledFilters:              def.EnabledFilters,
		MaxHostsToWeigh:             int(d.count(r.Body, "max_hosts_to_weigh", r.MaxHostsToWeigh, int64(def.MaxHostsToWeigh), 0, "0 weighs every host")),
		PlacementSampleSize:         int(d.count(r.Body, "placement_sample_size", r.PlacementSampleSize, int64(def.PlacementSampleSize), 0, "0 asks placement for max_placement_results candidates")),
		ElectionTTL:                 d.leaseTTL(r.Body, "election_ttl", r.ElectionTTL, def.ElectionTTL),
		AdvertiseURL:                d.advertiseURL(r.Body, "advertise_url", r.AdvertiseURL, def.AdvertiseURL),
		LeaderInterval:              d.duration(r.Body, "leader_interval", r.LeaderInterval, def.LeaderInterval, 100*time.Millisecond, "the leader would do nothing but sweep"),
		DownHostGrace:               d.duration(r.Body, "down_host_grace", r.DownHostGrace, def.DownHostGrace, 0, "it is a wait"),
		OrphanGrace:                 d.duration(r.Body, "orphan_grace", r.OrphanGrace, def.OrphanGrace, time.Second, "a claim being made must not look orphaned"),
		StuckBuildRequestTimeout:    d.duration(r.Body, "stuck_build_request_timeout", r.StuckBuildRequestTimeout, def.StuckBuildRequestTimeout, time.Second, "a request being leased must not look stuck"),
		EtcdDefrag:                  d.boolean(r.EtcdDefrag, def.EtcdDefrag),
		EtcdDefragInterval:          d.duration(r.Body, "etcd_defrag_interval", r.EtcdDefragInterval, def.EtcdDefragInterval, time.Second, "a defragmentation blocks its member; sizes are not worth a look more often"),
		EtcdDefragRatio:             def.EtcdDefragRatio,
		EtcdDefragMinBytes:          d.count(r.Body, "etcd_defrag_min_bytes", r.EtcdDefragMinBytes, def.EtcdDefragMinBytes, 0, "it is a size"),
		Weights:                     def.Weights,
		declRange:                   r.DefRange,
		filename:                    d.filename,
	}
	if v := r.EtcdDefragRatio; v != nil {
		s.EtcdDefragRatio = *v
		if *v <= 1 {
			d.bad(r.Body, "etcd_defrag_ratio", "Invalid etcd_defrag_ratio",
				fmt.Sprintf("etcd_defrag_ratio is the backend file's size over its live data, which defragmentation brings to about 1; it must be greater than 1 or every member would be defragmented every time; got %g.", *v))
		}
	}
	s.LimitTenantsToPlacementAggregate = d.boolean(r.LimitTenants, def.LimitTenantsToPlacementAggregate)
	s.PlacementAggregateRequiredForTenants = d.boolean(r.AggregateRequiredForTenants, def.PlacementAggregateRequiredForTenants)
	s.EnableIsolatedAggregateFiltering = d.boolean(r.IsolatedAggregates, def.EnableIsolatedAggregateFiltering)
	s.EmptyPlacementFallback = d.boolean(r.EmptyPlacementFallback, def.EmptyPlacementFallback)
	if r.EnabledFilters != nil {
		s.EnabledFilters = *r.EnabledFilters
		s.enabledFiltersRange = attrRange(r.Body, "enabled_filters")
		seen := map[string]bool{}
		for _, f := range s.EnabledFilters {
			if seen[f] {
				d.bad(r.Body, "enabled_filters", "Duplicate filter",
					fmt.Sprintf("%q is listed twice; each filter runs once.", f))
			}
			seen[f] = true
		}
	}
	if w := r.Weights; w != nil {
		s.Weights = Weights{
			RAM:              d.float(w.RAM, def.Weights.RAM),
			CPU:              d.float(w.CPU, def.Weights.CPU),
			Disk:             d.float(w.Disk, def.Weights.Disk),
			IOOps:            d.float(w.IOOps, def.Weights.IOOps),
			BuildFailure:     d.float(w.BuildFailure, def.Weights.BuildFailure),
			SoftAffinity:     d.float(w.SoftAffinity, def.Weights.SoftAffinity),
			SoftAntiAffinity: d.float(w.SoftAntiAffinity, def.Weights.SoftAntiAffinity),
			NumInstances:     d.float(w.NumInstances, def.Weights.NumInstances),
		}
	}
	return s
}

func (d *decoder) conductor(r *rawConductor) *Conductor {
	def := d.def.Conductor
	return &Conductor{
		Cell:      d.name(r.Body, "cell", r.Cell),
		Workers:   int(d.count(r.Body, "workers", r.Workers, int64(def.Workers), 1, "nothing would lease retries")),
		LeaseTTL:  d.leaseTTL(r.Body, "lease_ttl", r.LeaseTTL, def.LeaseTTL),
		Ranking:   d.ranking(r.Body, r.RankGrace, r.HolderIdleAfter, r.StealAfter, def.Ranking),
		declRange: r.DefRange,
	}
}

// ranking reads a queue's rank_grace and holder_idle_after. Both must be
// positive (a zero grace has every holder race for every item, and a
// zero idle window takes every holder for stalled), and the idle window
// at least the grace: a live holder is given one grace to lease an item
// it was told of, and leases no more often than that while it works
// through a backlog; a shorter window takes live holders for stalled,
// and the others race them for their items. steal_after is 0 (off) or
// at least the idle window: an item is not taken from a live holder
// sooner than from a silent one.
func (d *decoder) ranking(b hcl.Body, grace, idle, steal *string, def Ranking) Ranking {
	r := Ranking{
		Grace:      d.duration(b, "rank_grace", grace, def.Grace, time.Millisecond, "at 0 every holder races for every item"),
		IdleAfter:  d.duration(b, "holder_idle_after", idle, def.IdleAfter, time.Millisecond, "at 0 every holder looks stalled"),
		StealAfter: d.duration(b, "steal_after", steal, def.StealAfter, 0, "0 turns stealing off"),
	}
	if r.StealAfter > 0 && r.IdleAfter >= time.Millisecond && r.StealAfter < r.IdleAfter {
		name := "steal_after"
		if steal == nil {
			name = "holder_idle_after" // only the window was written: point there
		}
		d.bad(b, name, "Invalid "+name,
			fmt.Sprintf("steal_after (%s) must be 0 (never) or at least holder_idle_after (%s): an item is not taken from a holder that is still leasing sooner than from one that has stopped.",
				r.StealAfter, r.IdleAfter))
	}
	if r.Grace >= time.Millisecond && r.IdleAfter >= time.Millisecond && r.IdleAfter < r.Grace {
		name := "holder_idle_after"
		if idle == nil {
			name = "rank_grace" // only the grace was written: point there
		}
		d.bad(b, name, "Invalid "+name,
			fmt.Sprintf("holder_idle_after (%s) must be at least rank_grace (%s): a live holder is given one grace to lease an item it was told of and leases no more often than that while it works through a backlog, so a shorter idle window takes live holders for stalled and the others race them for their items.",
				r.IdleAfter, r.Grace))
	}
	return r
}

func (d *decoder) agent(r *rawAgent) *Agent {
	def := d.def.Agent
	// Decoded first so the cross-check below runs only when both parsed:
	// one typo should yield one error.
	n := len(d.diags)
	report := d.duration(r.Body, "report_interval", r.ReportInterval, def.ReportInterval, time.Second, "the host would flood etcd")
	down := d.duration(r.Body, "service_down_time", r.ServiceDownTime, def.ServiceDownTime, time.Second, "it is the liveness lease's TTL")
	if len(d.diags) == n && down <= report {
		at := "service_down_time"
		if r.ServiceDownTime == nil {
			at = "report_interval"
		}
		d.bad(r.Body, at, "service_down_time too short",
			fmt.Sprintf("service_down_time (%s) must exceed report_interval (%s), or a healthy host looks down between two reports.", down, report))
	}
	a := &Agent{
		Host:                 d.name(r.Body, "host", r.Host),
		Cell:                 d.name(r.Body, "cell", r.Cell),
		Driver:               d.enum(r.Body, "driver", r.Driver, def.Driver, DriverFake, DriverProcess),
		ReportInterval:       report,
		ServiceDownTime:      down,
		MaxConcurrentBuilds:  int(d.count(r.Body, "max_concurrent_builds", r.MaxConcurrentBuilds, int64(def.MaxConcurrentBuilds), 1, "the agent would build nothing")),
		TrackInstanceChanges: d.boolean(r.TrackInstanceChanges, def.TrackInstanceChanges),
		InstanceSyncInterval: d.duration(r.Body, "instance_sync_interval", r.InstanceSyncInterval, def.InstanceSyncInterval, time.Second, "schedulers re-list a host whose sync differs"),
		ProviderSyncInterval: d.duration(r.Body, "provider_sync_interval", r.ProviderSyncInterval, def.ProviderSyncInterval, time.Second, "the agent would re-sync its provider without pause"),
		ProviderRefresh:      d.duration(r.Body, "resource_provider_association_refresh", r.ProviderRefresh, def.ProviderRefresh, 0, "0 never re-reads the provider on its own"),
		Inventory:            def.Inventory,
		Fake:                 def.Fake,
		Process:              def.Process,
		declRange:            r.DefRange,
	}
	if p := r.Process; p != nil {
		a.Process = ProcessDriver{
			Command:   d.str(p.Command, def.Process.Command),
			StateDir:  d.str(p.StateDir, def.Process.StateDir),
			StopGrace: d.duration(p.Body, "stop_grace", p.StopGrace, def.Process.StopGrace, 0, "a grace period cannot be negative"),
		}
	}
	if i := r.Inventory; i != nil {
		a.Inventory = Inventory{
			VCPUs:                d.count(i.Body, "vcpus", i.VCPUs, def.Inventory.VCPUs, 0, "0 detects from the host"),
			MemoryMB:             d.count(i.Body, "memory_mb", i.MemoryMB, def.Inventory.MemoryMB, 0, "0 detects from the host"),
			DiskGB:               d.count(i.Body, "disk_gb", i.DiskGB, def.Inventory.DiskGB, 0, "0 detects from the host"),
			ReservedHostMemoryMB: d.count(i.Body, "reserved_host_memory_mb", i.ReservedHostMemoryMB, def.Inventory.ReservedHostMemoryMB, 0, "nothing can be reserved below zero"),
			ReservedHostDiskGB:   d.count(i.Body, "reserved_host_disk_gb", i.ReservedHostDiskGB, def.Inventory.ReservedHostDiskGB, 0, "nothing can be reserved below zero"),
			ReservedHostCPUs:     d.count(i.Body, "reserved_host_cpus", i.ReservedHostCPUs, def.Inventory.ReservedHostCPUs, 0, "nothing can be reserved below zero"),
			CPUAllocationRatio:   d.ratio(i.Body, "cpu_allocation_ratio", i.CPUAllocationRatio, def.Inventory.CPUAllocationRatio),
			RAMAllocationRatio:   d.ratio(i.Body, "ram_allocation_ratio", i.RAMAllocationRatio, def.Inventory.RAMAllocationRatio),
			DiskAllocationRatio:  d.ratio(i.Body, "disk_allocation_ratio", i.DiskAllocationRatio, def.Inventory.DiskAllocationRatio),
		}
		inv := a.Inventory
		d.reservedFits(i.Body, "reserved_host_cpus", inv.ReservedHostCPUs, "vcpus", inv.VCPUs)
		d.reservedFits(i.Body, "reserved_host_memory_mb", inv.ReservedHostMemoryMB, "memory_mb", inv.MemoryMB)
		d.reservedFits(i.Body, "reserved_host_disk_gb", inv.ReservedHostDiskGB, "disk_gb", inv.DiskGB)
	}
	if f := r.Fake; f != nil {
		a.Fake = FakeDriver{
			BuildTime:         d.duration(f.Body, "build_time", f.BuildTime, def.Fake.BuildTime, 0, "a build cannot take negative time"),
			FailureRate:       d.float(f.FailureRate, def.Fake.FailureRate),
			Fail:              d.boolean(f.Fail, def.Fake.Fail),
			FailReschedulable: d.boolean(f.FailReschedulable, def.Fake.FailReschedulable),
			LiveMigrationTime: d.duration(f.Body, "live_migration_time", f.LiveMigrationTime, def.Fake.LiveMigrationTime, 0,
				"a live migration cannot take negative time"),
			FailLiveCheck: d.boolean(f.FailLiveCheck, def.Fake.FailLiveCheck),
			FailLiveStart: d.boolean(f.FailLiveStart, def.Fake.FailLiveStart),
			FailLiveOut:   d.boolean(f.FailLiveOut, def.Fake.FailLiveOut),
		}
		if a.Fake.FailureRate < 0 || a.Fake.FailureRate > 1 {
			d.bad(f.Body, "failure_rate", "Invalid failure_rate",
				fmt.Sprintf("failure_rate is a probability between 0 and 1; got %g.", a.Fake.FailureRate))
		}
	}
	return a
}

// reservedFits rejects a reservation that is not smaller than a size given
// in the file: Placement refuses an inventory whose reserved >= total. A
// detected size (0) is checked by the agent.
func (d *decoder) reservedFits(b hcl.Body, rname string, reserved int64, tname string, total int64) {
	if total > 0 && reserved >= total {
		at := rname
		if sb, ok := b.(*hclsyntax.Body); ok && sb.Attributes[rname] == nil {
			at = tname // the reservation is the default; the size is the news
		}
		d.bad(b, at, "Reservation too large",
			fmt.Sprintf("%s (%d) must be less than %s (%d): Placement rejects an inventory with nothing left to allocate.", rname, reserved, tname, total))
	}
}
