// Package servers is what Berth does for a server, without HTTP: create
// (the BuildRequests and InstanceMappings the superconductors pick up,
// with their group memberships), lookup wherever a server is (a
// BuildRequest, or an Instance in the cell its mapping names), list, and
// delete with its retry and outcome rules; the moves' API side (move.go:
// resize, migrate, confirm, revert; shelve.go: shelve, shelveOffload,
// unshelve; evacuate.go; reset_state.go: os-resetState). Both compute APIs call it:
// package compute (Nova's v2.1) and package api (Berth's /v1, which the
// berth CLI speaks until it goes); each turns its errors into its own
// answers.
//
// Creates ready at the same moment in one process are stored in one etcd
// request, each still stored or refused on its own (create_batch.go).
package servers
