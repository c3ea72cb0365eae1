// Package compute is the OpenStack Compute API v2.1 (Nova's), the API an
// operator's own tools speak: the openstack CLI, openstacksdk,
// gophercloud. It is named for the Keystone catalog's service type, as
// package placement is, and it is to replace package api's private /v1
// (issue 16), so it is not a child of that package.
//
// What Nova does is the specification, read from Nova 26 (Zed) itself
// (nova/api/openstack): microversions 2.1 to 2.93 negotiated from
// OpenStack-API-Version and X-OpenStack-Nova-API-Version
// (microversion.go), the version documents (versions.go), Nova's fault
// bodies and its bare router 404 (api.go), a typed route table with each
// route's microversions, schema and policy rule (routes.go), bodies and
// queries validated as Nova's Draft 4 JSON schemas with Nova's words
// (validate.go, flavor_schemas.go), and answers written as Python's
// json.dumps writes them: members in Nova's order, non-ASCII escaped,
// <, > and & as they are (pyjson.go).
//
// Served so far: the flavors resource with os-extra_specs and
// os-flavor-access (flavors.go, stored by flavor_store.go in the
// etcdschema.Flavor records /v1 reads). Not yet: servers, os-services,
// os-hypervisors, os-aggregates, os-server-groups, availability zones,
// limits; the /v2 (2.0) mount; policy enforcement (every caller acts as
// an admin until Keystone tokens are wired: see API.authorize).
package compute
