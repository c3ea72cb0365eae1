package scheduler

import (
	"fmt"

	"github.com/berth-project/berth/placement"
)

// applyRequestedDestination is Nova's requested_destination: a host or
// node becomes placement's in_tree (of every request group) on that compute node's provider, so
// candidates come from it alone; a cell is kept to by hostStates. An
// unknown host or a node that is not the host's is a NoValidHost, as in
// Nova, not an error of the caller's.
func (s *Scheduler) applyRequestedDestination(q *placement.CandidateQuery, spec *RequestSpec) error {
	d := spec.target()
	if d == nil || (d.Host == "" && d.Node == "") {
		return nil
	}
	host := d.host()
	if d.Node != "" && d.Node != host {
		return &NoValidHostError{Reason: fmt.Sprintf("Compute host %s has no node %s.", host, d.Node)}
	}
	v, ok := s.hosts.view(host)
	if !ok || v.Service.ProviderUUID == "" {
		return &NoValidHostError{Reason: fmt.Sprintf("Compute host %s could not be found.", host)}
	}
	for i := range q.Groups {
		q.Groups[i].InTree = v.Service.ProviderUUID // every group, as Nova does
	}
	return nil
}

// admits says whether host in cell satisfies the requested destination;
// a nil destination admits every host.
func (d *Destination) admits(host, cell string) bool {
	if d == nil {
		return true
	}
	if d.Host != "" && d.Host != host {
		return false
	}
	if d.Node != "" && d.Node != host {
		return false
	}
	return d.Cell == "" || d.Cell == cell
}

// host is the host a destination pins the request to ("" for none): its
// host, else its node (one node per host, named as the host).
func (d *Destination) host() string {
	if d == nil {
		return ""
	}
	if d.Host != "" {
		return d.Host
	}
	return d.Node
}
