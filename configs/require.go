package configs

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Roles accepted by Require, one per `berth` command that runs a process.
const (
	RoleServer    = "server"
	RoleConductor = "conductor"
	RoleAgent     = "agent"
	RoleDev       = "dev"
	RoleEtcd      = "etcd"
)

// Require checks that the config holds what role needs to run. Parse
// accepts any subset of blocks so that one file may serve several roles;
// this is where a command says which one it is. The error is a
// *DiagnosticsError naming the file.
func (c *Config) Require(role string) error {
	var diags hcl.Diagnostics
	add := func(subject *hcl.Range, summary, detail string) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: subject})
	}
	switch role {
	case RoleDev:
		// Dev runs everything with defaults (EnableAllRoles).
	case RoleEtcd:
		if c.Etcd.Embedded == nil {
			var subject *hcl.Range
			if c.Etcd.declRange != (hcl.Range{}) {
				subject = c.Etcd.declRange.Ptr()
			}
			add(subject, "No embedded etcd member",
				"berth run etcd runs one etcd member: set etcd { embedded { ... } } (endpoints name a cluster run elsewhere).")
		}
	case RoleServer:
		if c.API == nil && c.Placement == nil && c.Scheduler == nil && c.Superconductor == nil && c.Identity == nil && c.Image == nil {
			add(nil, "No server role enabled",
				"berth run server runs the roles whose blocks the file has; add at least one of api, placement, scheduler, superconductor, identity or image.")
		}
	case RoleConductor:
		switch {
		case c.Conductor == nil:
			add(nil, "Missing conductor block", "berth run conductor needs a conductor { cell = \"...\" } block.")
		case c.Conductor.Cell == "":
			add(c.Conductor.declRange.Ptr(), "Missing cell", "A cell conductor serves exactly one cell; set cell = \"...\".")
		}
		c.requireExternalEtcd(role, add)
	case RoleAgent:
		switch {
		case c.Agent == nil:
			add(nil, "Missing agent block", "berth run agent needs an agent { host = \"...\" cell = \"...\" } block.")
		default:
			if c.Agent.Host == "" {
				add(c.Agent.declRange.Ptr(), "Missing host", "The agent registers its compute host under this name; set host = \"...\".")
			}
			if c.Agent.Cell == "" {
				add(c.Agent.declRange.Ptr(), "Missing cell", "The agent's host is mapped to this cell; set cell = \"...\".")
			}
		}
		c.requireExternalEtcd(role, add)
	default:
		return fmt.Errorf("config: unknown role %q (want %s)", role,
			strings.Join([]string{RoleServer, RoleConductor, RoleAgent, RoleEtcd, RoleDev}, ", "))
	}
	return diagsError(c.Filename, diags)
}

// requireExternalEtcd rejects embedded etcd for conductors and agents: they
// must join the control plane's cluster, and an embedded member would be a
// cluster of its own where they would wait for work forever.
func (c *Config) requireExternalEtcd(role string, add func(*hcl.Range, string, string)) {
	if len(c.Etcd.Endpoints) > 0 {
		return
	}
	var subject *hcl.Range
	if c.Etcd.declRange != (hcl.Range{}) {
		subject = c.Etcd.declRange.Ptr()
	}
	add(subject, "Missing etcd endpoints",
		fmt.Sprintf("berth run %s must join the control plane's etcd: set etcd { endpoints = [...] } (an embedded etcd here would be a separate cluster).", role))
}
