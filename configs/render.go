package configs

import (
	"bytes"
	"embed"
	"fmt"
	"net"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// The deployment templates: one HCL file per role for one machine of a
// multi-host deployment. deploy/ renders them on each VM (`berth config
// render`), and the multi-host e2e harness renders the same ones for each
// of its network-namespace hosts, so what is tested is what is deployed.
//
//go:embed templates/*.hcl.tmpl
var deployTemplates embed.FS

// Deployment ports, the same on every machine (Nova and Placement's usual
// ones for the APIs, etcd's for etcd).
const (
	DeployEtcdClientPort = 2379
	DeployEtcdPeerPort   = 2380
	DeployAPIPort        = 8774
	DeployPlacementPort  = 8778
	DeploySchedulerPort  = 8775
	DeployIdentityPort   = 5000 // Keystone's
	// The status listeners (/healthz, /readyz, /metrics) of the roles
	// without an HTTP server of their own; servers answer on their API
	// ports. Next to each other, clear of the OpenStack API ports
	// (8774-8780) and of node_exporter's 9100, and distinct because an
	// etcd member, a conductor and an agent often share a machine.
	DeployEtcdStatusPort      = 8791
	DeployConductorStatusPort = 8792
	DeployAgentStatusPort     = 8793
)

// DefaultTLSDir is where a machine's certificates are (DeployVars.TLSDir).
const DefaultTLSDir = "/etc/berth/tls"

// DeployRoles are the roles RenderDeploy has a template for.
var DeployRoles = []string{RoleEtcd, RoleServer, RoleConductor, RoleAgent}

// EtcdMember is one member of the deployment's etcd cluster.
type EtcdMember struct {
	Name    string // the member's name (usually its machine's)
	Address string // the machine's IP address or DNS name
}

// DeployVars is what differs between the machines of a deployment.
type DeployVars struct {
	// Name is this machine's name: the etcd member name of `berth run etcd`
	// and the compute host name of `berth run agent`.
	Name string
	// Address is this machine's address, which its roles bind to and
	// advertise.
	Address string
	// Etcd lists the cluster's members, the same on every machine.
	Etcd []EtcdMember
	// Cell is the cell of this machine's agent and conductor.
	Cell string
	// DataDir holds the etcd member's data and the process driver's
	// state ("" = /var/lib/berth).
	DataDir string
	// Vars sets tunables (see DeployTunables); the others keep their
	// defaults. An unknown name is an error.
	Vars map[string]string
	// TLSDir holds the lab CA's certificate and this machine's (`berth
	// tls ca`, `berth tls cert -name NAME`): ca.pem, NAME.pem and
	// NAME-key.pem; "" is /etc/berth/tls. Every listener, etcd member and
	// etcd client of the machine uses them.
	TLSDir string
	// NoTLS renders plain HTTP everywhere (no tls blocks), for a lab
	// without certificates; deployments serve TLS by default.
	NoTLS bool
	// AdminPasswordHash is the bcrypt hash of the identity admin's
	// password (`berth identity hash-password`), required by the server
	// role: a deployment's APIs check identity tokens (auth =
	// "keystone"), never noauth, and the admin is who logs in first.
	AdminPasswordHash string
}

// tunable is a template variable an operator may set, with its kind
// (checked before it is written into HCL) and default.
type tunable struct {
	kind string // "string", "duration", "int", "float" or "bool"
	def  string
	help string
}

// deployTunables are the -var names; each template uses those of its role.
var deployTunables = map[string]tunable{
	"etcd_prefix":                           {"string", "/berth", "prefix of every Berth key"},
	"log_level":                             {"string", "info", "trace, debug, info, warn or error"},
	"log_format":                            {"string", "text", "text or json"},
	"initial_cluster_state":                 {"string", ClusterStateNew, "etcd: new, or existing to join a running cluster"},
	"auto_compaction_retention":             {"duration", "5m", "etcd: history kept"},
	"quota_backend_bytes":                   {"int", "8589934592", "etcd: backend size limit"},
	"etcd_log_level":                        {"string", "warn", "etcd: its own messages logged from this level: debug, info, warn or error"},
	"etcd_heartbeat_interval":               {"duration", "100ms", "etcd: raft leader's heartbeat"},
	"etcd_election_timeout":                 {"duration", "1s", "etcd: time without a heartbeat before an election (at least 5 heartbeats)"},
	"max_attempts":                          {"int", "3", "scheduler: hosts tried per instance"},
	"election_ttl":                          {"duration", "10s", "scheduler: leader lease TTL"},
	"leader_interval":                       {"duration", "30s", "scheduler: leader duty period"},
	"down_host_grace":                       {"duration", "60s", "scheduler: wait before rescheduling a down host's builds"},
	"orphan_grace":                          {"duration", "10m", "scheduler: age of orphaned allocations removed"},
	"superconductor_workers":                {"int", "128", "superconductor: build requests at once"},
	"superconductor_lease_ttl":              {"duration", "10s", "superconductor: lease TTL"},
	"select_timeout":                        {"duration", "30s", "superconductor: wait for one scheduler"},
	"conductor_workers":                     {"int", "4", "conductor: retries at once"},
	"conductor_lease_ttl":                   {"duration", "15s", "conductor: lease TTL"},
	"driver":                                {"string", "process", "agent: process or fake"},
	"process_command":                       {"string", "sleep infinity", "agent: command of an instance without berth:command"},
	"stop_grace":                            {"duration", "10s", "agent: SIGTERM to SIGKILL on delete"},
	"build_time":                            {"duration", "0s", "agent, fake driver: build duration"},
	"failure_rate":                          {"float", "0", "agent, fake driver: probability a build fails"},
	"fail":                                  {"bool", "false", "agent, fake driver: every build fails"},
	"report_interval":                       {"duration", "10s", "agent: service record refresh"},
	"service_down_time":                     {"duration", "60s", "agent: liveness lease TTL"},
	"max_concurrent_builds":                 {"int", "10", "agent: builds at once"},
	"instance_sync_interval":                {"duration", "120s", "agent: full instance list period"},
	"provider_sync_interval":                {"duration", "60s", "agent: provider re-sync period"},
	"resource_provider_association_refresh": {"duration", "300s", "agent: how long a provider sync trusts what it last read or wrote of its provider (0s = read once)"},
	"vcpus":                                 {"int", "0", "agent: vCPUs offered (0 = detected)"},
	"memory_mb":                             {"int", "0", "agent: memory offered (0 = detected)"},
	"disk_gb":                               {"int", "0", "agent: disk offered (0 = detected)"},
	"reserved_host_memory_mb":               {"int", "512", "agent: memory kept for the host"},
	"status_port":                           {"port", "0", "etcd, conductor, agent: /healthz, /readyz and /metrics port (0 = the role's: 8791, 8792, 8793); set it for a second conductor on one machine"},
}

// DeployTunables describes the -var names, one "name (default): help" line
// each, sorted, for usage text.
func DeployTunables() []string {
	var out []string
	for n, t := range deployTunables {
		out = append(out, fmt.Sprintf("%s (default %q): %s", n, t.def, t.help))
	}
	sort.Strings(out)
	return out
}

// templateData is what the templates see.
type templateData struct {
	Name, Address, Cell string
	Header              string
	EtcdEndpoints       []string
	InitialCluster      string
	EtcdDataDir         string
	EtcdClientURL       string
	EtcdPeerURL         string
	ProcessStateDir     string
	AdminPasswordHash   string
	Var                 map[string]string
	// TLS: the machine's certificate and key and the lab CA; all "" with
	// NoTLS. Scheme is "https" or "http" accordingly.
	TLS                    bool
	TLSCert, TLSKey, TLSCA string
	Scheme                 string
}

// RenderDeploy renders role's deployment config for one machine and checks
// the result is a valid config for that role, so a bad variable is caught
// here, with its name, rather than when the service starts.
func RenderDeploy(role string, v DeployVars) ([]byte, error) {
	if !slices.Contains(DeployRoles, role) {
		return nil, fmt.Errorf("render: no template for role %q (want one of %s)", role, strings.Join(DeployRoles, ", "))
	}
	data, err := v.templateData(role)
	if err != nil {
		return nil, fmt.Errorf("render %s config: %w", role, err)
	}
	name := role + ".hcl.tmpl"
	tmpl, err := template.New(name).Option("missingkey=error").Funcs(template.FuncMap{
		"q":    hclQuote,
		"bind": func(addr string, port int) string { return net.JoinHostPort(addr, strconv.Itoa(port)) },
		// statusBind is the status listener: the role's conventional port
		// unless status_port (checked as a port, 0 = unset) says another.
		"statusBind": func(addr, port string, def int) string {
			if port != "" && port != "0" {
				return net.JoinHostPort(addr, port)
			}
			return net.JoinHostPort(addr, strconv.Itoa(def))
		},
		"url": func(addr string, port int) string {
			return data.Scheme + "://" + net.JoinHostPort(addr, strconv.Itoa(port))
		},
	}).ParseFS(deployTemplates, path.Join("templates", name))
	if err != nil {
		return nil, fmt.Errorf("render %s config: template: %w", role, err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, data); err != nil {
		return nil, fmt.Errorf("render %s config: %w", role, err)
	}
	cfg, err := Parse(out.Bytes(), fmt.Sprintf("%s.hcl (rendered for %s)", role, v.Name))
	if err == nil {
		err = cfg.Require(role)
	}
	if err != nil {
		return nil, fmt.Errorf("render %s config: the result is not valid (check the -var values): %w", role, err)
	}
	return out.Bytes(), nil
}

func (v DeployVars) templateData(role string) (*templateData, error) {
	if err := checkDeployName("name", v.Name); err != nil {
		return nil, err
	}
	if strings.TrimSpace(v.Address) == "" || strings.ContainsAny(v.Address, " /\"") {
		return nil, fmt.Errorf("address %q: want this machine's IP address or DNS name", v.Address)
	}
	if len(v.Etcd) == 0 {
		return nil, fmt.Errorf("no etcd members: list the cluster as name=address[,name=address]")
	}
	if (role == RoleAgent || role == RoleConductor) && v.Cell == "" {
		return nil, fmt.Errorf("the %s role needs a cell", role)
	}
	if v.Cell != "" {
		if err := checkDeployName("cell", v.Cell); err != nil {
			return nil, err
		}
	}
	if role == RoleServer && v.AdminPasswordHash == "" {
		return nil, fmt.Errorf("the server role needs the identity admin's password hash (make one with `berth identity hash-password`)")
	}
	d := &templateData{
		Name: v.Name, Address: v.Address, Cell: v.Cell, AdminPasswordHash: v.AdminPasswordHash,
		Header: "Rendered by `berth config render`; change the template or re-render rather than editing.",
		Var:    map[string]string{}, Scheme: "http",
	}
	if !v.NoTLS {
		dir := v.TLSDir
		if dir == "" {
			dir = DefaultTLSDir
		}
		if !path.IsAbs(dir) || strings.ContainsAny(dir, "\"\n") {
			return nil, fmt.Errorf("tls dir %q: want an absolute path", dir)
		}
		d.TLS, d.Scheme = true, "https"
		d.TLSCA = path.Join(dir, "ca.pem")
		d.TLSCert = path.Join(dir, v.Name+".pem")
		d.TLSKey = path.Join(dir, v.Name+"-key.pem")
	}
	seen := map[string]bool{}
	var peers []string
	self := false
	for _, m := range v.Etcd {
		if err := checkDeployName("etcd member name", m.Name); err != nil {
			return nil, err
		}
		if seen[m.Name] {
			return nil, fmt.Errorf("etcd member %q listed twice", m.Name)
		}
		seen[m.Name] = true
		if strings.TrimSpace(m.Address) == "" {
			return nil, fmt.Errorf("etcd member %q has no address", m.Name)
		}
		d.EtcdEndpoints = append(d.EtcdEndpoints, d.Scheme+"://"+net.JoinHostPort(m.Address, strconv.Itoa(DeployEtcdClientPort)))
		peers = append(peers, m.Name+"="+d.Scheme+"://"+net.JoinHostPort(m.Address, strconv.Itoa(DeployEtcdPeerPort)))
		if m.Name == v.Name {
			self = true
			if m.Address != v.Address {
				return nil, fmt.Errorf("etcd member %q has address %s but this machine's address is %s", m.Name, m.Address, v.Address)
			}
		}
	}
	if role == RoleEtcd && !self {
		return nil, fmt.Errorf("this machine (%q) is not among the etcd members; the etcd role runs on a member", v.Name)
	}
	if len(v.Etcd) > 1 {
		d.InitialCluster = strings.Join(peers, ",")
	}
	dataDir := v.DataDir
	if dataDir == "" {
		dataDir = "/var/lib/berth"
	}
	d.EtcdDataDir = path.Join(dataDir, "etcd")
	d.ProcessStateDir = path.Join(dataDir, "process")
	d.EtcdClientURL = d.Scheme + "://" + net.JoinHostPort(v.Address, strconv.Itoa(DeployEtcdClientPort))
	d.EtcdPeerURL = d.Scheme + "://" + net.JoinHostPort(v.Address, strconv.Itoa(DeployEtcdPeerPort))

	for n, t := range deployTunables {
		d.Var[n] = t.def
	}
	for n, val := range v.Vars {
		t, ok := deployTunables[n]
		if !ok {
			var known []string
			for k := range deployTunables {
				known = append(known, k)
			}
			sort.Strings(known)
			return nil, fmt.Errorf("unknown variable %q (known: %s)", n, strings.Join(known, ", "))
		}
		if err := t.check(val); err != nil {
			return nil, fmt.Errorf("variable %s=%q: %w", n, val, err)
		}
		d.Var[n] = val
	}
	return d, nil
}

// check keeps a value that the template writes unquoted (a number or a
// bool) from being anything else.
func (t tunable) check(v string) error {
	var err error
	switch t.kind {
	case "int":
		_, err = strconv.ParseInt(v, 10, 64)
	case "float":
		_, err = strconv.ParseFloat(v, 64)
	case "bool":
		_, err = strconv.ParseBool(v)
		if err == nil && v != "true" && v != "false" {
			err = fmt.Errorf("want true or false")
		}
	case "duration":
		_, err = time.ParseDuration(v)
	case "port":
		var n int64
		n, err = strconv.ParseInt(v, 10, 32)
		if err == nil && (n < 0 || n > 65535) {
			err = fmt.Errorf("out of range")
		}
	}
	if err != nil {
		return fmt.Errorf("not a valid %s", t.kind)
	}
	return nil
}

// checkDeployName accepts what may stand in an etcd key segment and a
// systemd unit's environment: letters, digits, ".", "_", "-".
func checkDeployName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%s %q: only letters, digits, \".\", \"_\" and \"-\" are allowed", what, s)
		}
	}
	return nil
}

// hclQuote writes s as an HCL string literal: Go's quoting, with HCL's
// template sequences "${" and "%{" escaped so a value is never evaluated.
func hclQuote(s string) string {
	q := strconv.Quote(s)
	q = strings.ReplaceAll(q, "${", "$${")
	return strings.ReplaceAll(q, "%{", "%%{")
}

// ParseEtcdMembers reads "name=address,name=address" (the -etcd flag).
func ParseEtcdMembers(s string) ([]EtcdMember, error) {
	var out []EtcdMember
	for _, part := range strings.Split(s, ",") {
		n, a, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || n == "" || a == "" {
			return nil, fmt.Errorf("etcd member %q: want name=address, like etcd-1=10.0.0.11", part)
		}
		out = append(out, EtcdMember{Name: n, Address: a})
	}
	return out, nil
}
