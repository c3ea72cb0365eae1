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
// Served so far: the flavors resource with os-extra_specs (validated
// from 2.86 by Nova's own validator table) and os-flavor-access
// (flavors.go, stored by flavor_store.go in the etcdschema.Flavor records
// /v1 reads); os-aggregates with Nova's integer ids (aggregates.go, over
// package aggregates, which /v1 shares, mirroring hosts into placement
// aggregates as /v1 does); os-server-groups (server_groups.go, over
// package servergroups); limits (limits.go). Berth has no quotas yet:
// every maximum in limits is -1 (unlimited) and the totals are counted
// from the project's servers and server groups; the maxima become the
// project's quotas when quotas land. os-services, os-hypervisors and
// os-availability-zone (services.go, hypervisors.go,
// availability_zones.go) over package hosts, which /v1 shares: Berth
// lists a nova-compute per agent's host and a nova-scheduler /
// nova-conductor per running scheduler / superconductor (from /members/,
// in the internal zone); a disable waits for the agent's
// COMPUTE_STATUS_DISABLED as /v1's does; a delete decommissions the host
// (hosts.Decommission). Hypervisor figures are the host's provider's
// inventories and usages; Berth has no hypervisor type, version, host
// IP, CPU info or uptime to report ("berth", 0, null, {}, null; uptime
// answers 501 as Nova's fake driver). Not yet: servers;
// /os-aggregates/{id}/images (2.81); the /v2 (2.0) and /{project_id}/
// URL forms.
//
// Authentication and policy (auth.go): below /v2.1/ every request needs
// a token, checked before routing as keystonemiddleware does (401 with
// WWW-Authenticate otherwise), in "keystone" mode by an
// identity.Verifier, in "noauth" mode (berth dev, tests) read as Nova's
// noauth2 reads it ("user:project"; the user "admin" is an admin). Each
// route's policy column is enforced with Nova's new defaults: ADMIN is
// role admin, PROJECT_READER_OR_ADMIN and PROJECT_MEMBER_OR_ADMIN are
// admin or that role on the resource's project, the zero policy any
// valid token. auth_matrix_test.go checks every route of the table
// against every kind of caller: a new route gets its rows there.
//
// Every caller has a project (noauth's tokenless caller is the admin of
// project "admin"), and what a project owns is its own: a server group
// belongs to its creator's project and user; a non-admin lists and finds
// only its project's groups (another project's is a 404, as Nova's
// project-filtered lookup answers, not a 403); limits count the caller's
// project's servers and groups, another project's only for an admin
// (tenant_id). A caller without a project (a system-scoped token) owns
// nothing: the empty project is no wildcard.
//
// Nova's answers are the tests' reference, recorded from Nova 26's own
// code with Debian's python3-nova (testdata/*.py): its validator's
// messages, its version apps and views, a scenario of its flavors API
// and the status each caller of the authorization matrix gets from its
// router and policy engine (nova_policy.py), run over SQLite (no Nova
// service needed); and a scenario of
// os-aggregates, os-server-groups and limits answered by the running
// reference Nova with two compute hosts (testdata/nova_aggregates.py),
// and one of os-services, os-hypervisors and os-availability-zone
// (testdata/nova_hosts.py, replayed by TestHostsMatchNova over real
// agents). The character classes of
// names and descriptions and the extra spec validators are generated
// from Nova's tables:
//
//go:generate sh -c "/usr/bin/python3 testdata/gen_charsets.py > charsets_gen.go && gofmt -w charsets_gen.go"
//go:generate sh -c "/usr/bin/python3 testdata/gen_extra_specs.py > extra_specs_gen.go && gofmt -w extra_specs_gen.go"
package compute
