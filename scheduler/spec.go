// Package scheduler is Berth's select_destinations: it turns a RequestSpec
// into a placement query, joins the allocation candidates with its
// watch-fed view of the hosts, filters and weighs them, claims resources
// for each instance and returns Nova-style Selections with alternates.
//
// Who may ask: select_destinations claims resources, so its HTTP endpoint
// is served behind RequireServiceToken (http_auth.go). A caller presents
// a short-lived service token for the built-in, system-scoped
// berth-service principal with role service (identity.ServiceTokens),
// minted by any Berth process from the deployment's token signing key in
// etcd and checked here with the same key; users' tokens, even admins',
// are refused, and so is anyone anonymous (401). Whoever can read etcd
// can mint one, which gives nothing away: etcd access already means
// writing every record the scheduler acts on (until etcd has per-role
// users). The superconductor's pool sends one on every remote call
// (ServiceTokens.Transport as its HTTP client's transport). Mutual TLS
// would bind the caller to a certificate instead; it waits for the TLS
// work of issue 18, and would replace only the check, not the callers.
package scheduler

import (
	"fmt"
	"sort"
	"strings"

	"github.com/berth-project/berth/etcdschema"
)

// RequestSpec is what select_destinations is asked to place.
type RequestSpec struct {
	InstanceUUIDs    []string                  `json:"instance_uuids"`
	Flavor           etcdschema.Flavor         `json:"flavor"`
	ProjectID        string                    `json:"project_id"`
	UserID           string                    `json:"user_id"`
	AvailabilityZone string                    `json:"availability_zone,omitempty"`
	Hints            etcdschema.SchedulerHints `json:"scheduler_hints,omitempty"`
	IgnoreHosts      []string                  `json:"ignore_hosts,omitempty"`
	RequestID        string                    `json:"request_id,omitempty"`
	// RequestedDestination pins the request to a host (and node) or a
	// cell, as Nova's requested_destination (server create with host /
	// hypervisor_hostname, microversion 2.74; forced evacuations).
	RequestedDestination *Destination `json:"requested_destination,omitempty"`
	// ForceHosts and ForceNodes are Nova's force_hosts / force_nodes
	// (availability_zone "zone:host[:node]", an admin's): the request
	// is placed on them without running the filters (forced.go).
	ForceHosts []string `json:"force_hosts,omitempty"`
	ForceNodes []string `json:"force_nodes,omitempty"`
	// MinRevision is the etcd revision the request was read at (the
	// BuildRequest's). The scheduler's views catch up to it before
	// choosing, so a host that registered before the request was made is
	// never missed because a watch lagged.
	MinRevision int64 `json:"min_revision,omitempty"`
}

// Destination is Nova's Destination object: any of host, node (Berth
// has one node per host, named as the host) and cell.
type Destination struct {
	Host string `json:"host,omitempty"`
	Node string `json:"node,omitempty"`
	Cell string `json:"cell,omitempty"`
}

// NoValidHostError says why no host could take the request: how many
// hosts each filter removed and why (a few hosts' reasons each), and for a
// request pinned to a host, why that host was turned down, so an operator
// can see what to fix.
type NoValidHostError struct {
	Reason string
	// Removed counts the hosts each filter removed, in filter order.
	Removed []FilterCount
	// RequestedHost is why the host the request was pinned to
	// (requested_destination) was turned down; nil when it was not, or
	// the request named no host.
	RequestedHost *HostRejection
	// sampled says the request saw a sample of the candidates
	// (placement_sample_size): it is tried again over all of them.
	sampled bool
}

// FilterCount is how many hosts one filter removed, with the reasons it
// gave for the first few ("<host>: <reason>").
type FilterCount struct {
	Filter  string   `json:"filter"`
	Removed int      `json:"removed"`
	Reasons []string `json:"reasons,omitempty"`
}

// HostRejection is why one host was turned down: By is the filter, or the
// step before the filters, that did it.
type HostRejection struct {
	Host   string `json:"host"`
	By     string `json:"by"`
	Reason string `json:"reason"`
}

// Error is Nova's "No valid host was found. " followed by the reason
// (tools that match Nova's words still match), then why the requested
// host was turned down, if it was. The count of every filter is in
// Details.
func (e *NoValidHostError) Error() string {
	var b strings.Builder
	b.WriteString("No valid host was found. ")
	b.WriteString(e.Reason)
	if r := e.RequestedHost; r != nil {
		fmt.Fprintf(&b, " Requested host %s: %s: %s.", r.Host, r.By, r.Reason)
	}
	return b.String()
}

// Details is what an operator reads after the message (a fault's
// details): every filter with the hosts it removed over the request's
// picks, and the reasons it gave for the first few.
func (e *NoValidHostError) Details() string {
	var b strings.Builder
	for _, c := range e.Removed {
		fmt.Fprintf(&b, "%s removed %d", c.Filter, c.Removed)
		if len(c.Reasons) > 0 {
			fmt.Fprintf(&b, ": %s", strings.Join(c.Reasons, "; "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// sortedKeys is a small helper for deterministic iteration.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
