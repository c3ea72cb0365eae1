package configs

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
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

// ---- the raw shape gohcl decodes into ---------------------------------

type rawFile struct {
	Etcd           *rawEtcd           `hcl:"etcd,block"`
	Log            *rawLog            `hcl:"log,block"`
	API            *rawAPI            `hcl:"api,block"`
	Placement      *rawPlacement      `hcl:"placement,block"`
	Scheduler      *rawScheduler      `hcl:"scheduler,block"`
	Superconductor *rawSuperconductor `hcl:"superconductor,block"`
	Conductor      *rawConductor      `hcl:"conductor,block"`
	Agent          *rawAgent          `hcl:"agent,block"`
}

type rawEtcd struct {
	Prefix      *string      `hcl:"prefix"`
	DialTimeout *string      `hcl:"dial_timeout"`
	Endpoints   *[]string    `hcl:"endpoints"`
	Username    *string      `hcl:"username"`
	Password    *string      `hcl:"password"`
	TLS         *rawTLS      `hcl:"tls,block"`
	Embedded    *rawEmbedded `hcl:"embedded,block"`
	DefRange    hcl.Range    `hcl:",def_range"`
	Body        hcl.Body     `hcl:",body"`
}

type rawTLS struct {
	CAFile   *string   `hcl:"ca_file"`
	CertFile *string   `hcl:"cert_file"`
	KeyFile  *string   `hcl:"key_file"`
	DefRange hcl.Range `hcl:",def_range"`
	Body     hcl.Body  `hcl:",body"`
}

type rawEmbedded struct {
	DataDir                 *string   `hcl:"data_dir"`
	ClientURL               *string   `hcl:"client_url"`
	PeerURL                 *string   `hcl:"peer_url"`
	Name                    *string   `hcl:"name"`
	AutoCompactionRetention *string   `hcl:"auto_compaction_retention"`
	QuotaBackendBytes       *int64    `hcl:"quota_backend_bytes"`
	DefRange                hcl.Range `hcl:",def_range"`
	Body                    hcl.Body  `hcl:",body"`
}

type rawLog struct {
	Level  *string  `hcl:"level"`
	Format *string  `hcl:"format"`
	Body   hcl.Body `hcl:",body"`
}

type rawAPI struct {
	Bind     *string   `hcl:"bind"`
	DefRange hcl.Range `hcl:",def_range"`
	Body     hcl.Body  `hcl:",body"`
}

type rawPlacement struct {
	Bind     *string    `hcl:"bind"`
	Auth     *string    `hcl:"auth"`
	Tokens   []rawToken `hcl:"token,block"`
	DefRange hcl.Range  `hcl:",def_range"`
	Body     hcl.Body   `hcl:",body"`
}

type rawToken struct {
	Token      string    `hcl:"secret,label"` // "secret" is what HCL's missing-label error calls it
	Roles      *[]string `hcl:"roles"`
	ProjectID  *string   `hcl:"project_id"`
	UserID     *string   `hcl:"user_id"`
	LabelRange hcl.Range `hcl:"secret,label_range"`
	DefRange   hcl.Range `hcl:",def_range"`
}

type rawScheduler struct {
	Bind                        *string     `hcl:"bind"`
	MaxAttempts                 *int64      `hcl:"max_attempts"`
	HostSubsetSize              *int64      `hcl:"host_subset_size"`
	MaxPlacementResults         *int64      `hcl:"max_placement_results"`
	ShuffleBestSameWeighedHosts *bool       `hcl:"shuffle_best_same_weighed_hosts"`
	TrackInstanceChanges        *bool       `hcl:"track_instance_changes"`
	EnabledFilters              *[]string   `hcl:"enabled_filters"`
	MaxHostsToWeigh             *int64      `hcl:"max_hosts_to_weigh"`
	ElectionTTL                 *string     `hcl:"election_ttl"`
	Weights                     *rawWeights `hcl:"weights,block"`
	DefRange                    hcl.Range   `hcl:",def_range"`
	Body                        hcl.Body    `hcl:",body"`
}

type rawWeights struct {
	RAM              *float64 `hcl:"ram"`
	CPU              *float64 `hcl:"cpu"`
	Disk             *float64 `hcl:"disk"`
	IOOps            *float64 `hcl:"io_ops"`
	BuildFailure     *float64 `hcl:"build_failure"`
	SoftAffinity     *float64 `hcl:"soft_affinity"`
	SoftAntiAffinity *float64 `hcl:"soft_anti_affinity"`
	NumInstances     *float64 `hcl:"num_instances"`
}

type rawSuperconductor struct {
	Workers  *int64    `hcl:"workers"`
	DefRange hcl.Range `hcl:",def_range"`
	Body     hcl.Body  `hcl:",body"`
}

type rawConductor struct {
	Cell     *string   `hcl:"cell"`
	Workers  *int64    `hcl:"workers"`
	LeaseTTL *string   `hcl:"lease_ttl"`
	DefRange hcl.Range `hcl:",def_range"`
	Body     hcl.Body  `hcl:",body"`
}

type rawAgent struct {
	Host                 *string       `hcl:"host"`
	Cell                 *string       `hcl:"cell"`
	Driver               *string       `hcl:"driver"`
	ReportInterval       *string       `hcl:"report_interval"`
	ServiceDownTime      *string       `hcl:"service_down_time"`
	MaxConcurrentBuilds  *int64        `hcl:"max_concurrent_builds"`
	TrackInstanceChanges *bool         `hcl:"track_instance_changes"`
	InstanceSyncInterval *string       `hcl:"instance_sync_interval"`
	Inventory            *rawInventory `hcl:"inventory,block"`
	Fake                 *rawFake      `hcl:"fake,block"`
	DefRange             hcl.Range     `hcl:",def_range"`
	Body                 hcl.Body      `hcl:",body"`
}

type rawInventory struct {
	VCPUs                *int64    `hcl:"vcpus"`
	MemoryMB             *int64    `hcl:"memory_mb"`
	DiskGB               *int64    `hcl:"disk_gb"`
	ReservedHostMemoryMB *int64    `hcl:"reserved_host_memory_mb"`
	ReservedHostDiskGB   *int64    `hcl:"reserved_host_disk_gb"`
	ReservedHostCPUs     *int64    `hcl:"reserved_host_cpus"`
	CPUAllocationRatio   *float64  `hcl:"cpu_allocation_ratio"`
	RAMAllocationRatio   *float64  `hcl:"ram_allocation_ratio"`
	DiskAllocationRatio  *float64  `hcl:"disk_allocation_ratio"`
	DefRange             hcl.Range `hcl:",def_range"`
	Body                 hcl.Body  `hcl:",body"`
}

type rawFake struct {
	BuildTime         *string  `hcl:"build_time"`
	FailureRate       *float64 `hcl:"failure_rate"`
	Fail              *bool    `hcl:"fail"`
	FailReschedulable *bool    `hcl:"fail_reschedulable"`
	Body              hcl.Body `hcl:",body"`
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
	if r.API != nil {
		c.API = &API{
			Bind:      d.bind(r.API.Body, "bind", r.API.Bind, d.def.API.Bind),
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
			Workers:   int(d.count(s.Body, "workers", s.Workers, int64(d.def.Superconductor.Workers), 1, "nothing would lease build requests")),
			declRange: s.DefRange,
		}
	}
	if r.Conductor != nil {
		c.Conductor = d.conductor(r.Conductor)
	}
	if r.Agent != nil {
		c.Agent = d.agent(r.Agent)
	}
	return c
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
		e.Embedded = d.embedded(r.Embedded)
	case r.Endpoints == nil:
		// Neither: the design's default is the embedded single member.
		e.Embedded = def.Embedded
	}
	if e.Embedded != nil && (r.TLS != nil || r.Username != nil) {
		subj := attrRange(r.Body, "username")
		if r.TLS != nil {
			subj = r.TLS.DefRange.Ptr()
		}
		d.diags = append(d.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "TLS or auth with embedded etcd",
			Detail:   "Embedded etcd serves plain HTTP without auth on its client_url; tls, username and password apply only to external endpoints.",
			Subject:  subj,
		})
	}
	return e
}

func (d *decoder) tls(r *rawTLS) *TLS {
	t := &TLS{CAFile: d.str(r.CAFile, ""), CertFile: d.str(r.CertFile, ""), KeyFile: d.str(r.KeyFile, "")}
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		d.bad(r.Body, "cert_file", "Certificate without key", "cert_file needs key_file: a client certificate is useless without its private key.")
	case t.KeyFile != "" && t.CertFile == "":
		d.bad(r.Body, "key_file", "Key without certificate", "key_file needs cert_file.")
	}
	return t
}

func (d *decoder) embedded(r *rawEmbedded) *Embedded {
	def := d.def.Etcd.Embedded
	m := &Embedded{
		DataDir:                 d.str(r.DataDir, def.DataDir),
		ClientURL:               d.httpURL(r.Body, "client_url", r.ClientURL, def.ClientURL),
		PeerURL:                 d.httpURL(r.Body, "peer_url", r.PeerURL, def.PeerURL),
		Name:                    d.str(r.Name, def.Name),
		AutoCompactionRetention: d.duration(r.Body, "auto_compaction_retention", r.AutoCompactionRetention, def.AutoCompactionRetention, time.Second, "without compaction etcd refuses writes once it reaches its quota"),
		QuotaBackendBytes:       d.count(r.Body, "quota_backend_bytes", r.QuotaBackendBytes, def.QuotaBackendBytes, 0, "0 means etcd's own default"),
	}
	if m.DataDir == "" {
		d.bad(r.Body, "data_dir", "Empty data_dir", "Embedded etcd needs a directory for its data.")
	}
	if r.Name != nil && m.Name == "" {
		d.bad(r.Body, "name", "Empty name", "The member name appears in etcd's cluster configuration; leave it out to use \"berth\".")
	}
	return m
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

func (d *decoder) placement(r *rawPlacement) *Placement {
	def := d.def.Placement
	p := &Placement{
		Bind:      d.bind(r.Body, "bind", r.Bind, def.Bind),
		Auth:      d.enum(r.Body, "auth", r.Auth, def.Auth, AuthNoAuth, AuthTokens),
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
		tok := Token{Token: t.Token, ProjectID: d.str(t.ProjectID, ""), UserID: d.str(t.UserID, "")}
		if t.Roles != nil {
			tok.Roles = *t.Roles
		}
		p.Tokens = append(p.Tokens, tok)
	}
	switch {
	case p.Auth == AuthTokens && len(r.Tokens) == 0:
		d.bad(r.Body, "auth", "No tokens",
			"auth = \"tokens\" needs at least one token \"<secret>\" { ... } block, or no client could authenticate.")
	case p.Auth == AuthNoAuth && len(r.Tokens) > 0:
		d.diags = append(d.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Tokens without auth = \"tokens\"",
			Detail:  "With auth = \"noauth\" every request is accepted and token blocks are ignored; set auth = \"tokens\" or remove them.",
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
		EnabledFilters:              def.EnabledFilters,
		MaxHostsToWeigh:             int(d.count(r.Body, "max_hosts_to_weigh", r.MaxHostsToWeigh, int64(def.MaxHostsToWeigh), 0, "0 weighs every host")),
		ElectionTTL:                 d.leaseTTL(r.Body, "election_ttl", r.ElectionTTL, def.ElectionTTL),
		Weights:                     def.Weights,
		declRange:                   r.DefRange,
		filename:                    d.filename,
	}
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
		declRange: r.DefRange,
	}
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
		Inventory:            def.Inventory,
		Fake:                 def.Fake,
		declRange:            r.DefRange,
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

// ---- value helpers: default when unset, diagnose when wrong -----------

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

// httpURL is an embedded etcd URL; embedded etcd is configured without
// TLS, so only http is accepted.
func (d *decoder) httpURL(b hcl.Body, name string, v *string, def string) string {
	if v == nil {
		return def
	}
	u, err := url.Parse(*v)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.Port() == "" {
		d.bad(b, name, "Invalid "+name,
			fmt.Sprintf("%s must be an http URL with a port, like %q (embedded etcd serves without TLS); got %q.", name, def, *v))
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
