// Package hosts is what Berth's APIs do to compute hosts, without HTTP:
// read the service records with their liveness and instance counts, the
// compute node providers behind them, disable (with a reason) and enable
// a host and wait for its agent to confirm COMPUTE_STATUS_DISABLED, force
// it down, decommission it, and place hosts in availability zones.
//
// Both the private /v1 API (package api) and Nova's os-services,
// os-hypervisors and os-availability-zone (package compute) are thin
// callers of it: the rules live here once.
//
// A host is its service record (etcdschema.Service under
// /hosts/<host>/service), its agent's alive key (under the agent's lease),
// the instance info and build keys below /hosts/<host>/, its host mapping
// and its compute node provider in placement. Nova's integer ids (before
// microversion 2.53) and service uuids have no field in the record: they
// are derived from the record's etcd create revision (see Host.ID and
// Host.UUID), stable while the record lives and new when a decommissioned
// host registers again, as a new Nova service row would be.
package hosts
