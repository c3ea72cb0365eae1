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
// Served, each over the package /v1 shares:
//   - flavors, with os-extra_specs (validated from 2.86 by Nova's own
//     validator table) and os-flavor-access (flavors.go, flavor_store.go);
//   - os-aggregates with Nova's integer ids (aggregates.go, package
//     aggregates, mirrored into placement aggregates);
//   - os-server-groups (server_groups.go, package servergroups);
//   - limits (limits.go): Berth has no quotas yet, so every maximum is -1
//     (unlimited) and the totals are counted from the project's servers
//     and server groups;
//   - os-services, os-hypervisors and os-availability-zone (services.go,
//     hypervisors.go, availability_zones.go, package hosts): a
//     nova-compute per agent's host and a nova-scheduler / nova-conductor
//     per running scheduler / superconductor (from /members/, in the
//     internal zone); a disable waits for the agent's
//     COMPUTE_STATUS_DISABLED; a delete decommissions the host.
//     Hypervisor figures are the host's provider's inventories and
//     usages; Berth has no hypervisor type, version, host IP, CPU info or
//     uptime ("berth", 0, null, {}, null; uptime answers 501 as Nova's
//     fake driver);
//   - servers (servers*.go: create, list, detail, show, delete, package
//     servers), imageRef resolved through an ImageCatalog (images.Store,
//     the image service's, in a stack), and os-instance-actions
//     (instance_actions.go). A create checks its flavor and image as a
//     create last read them (flavorStore.recent, ImageCache) and stores
//     its servers only while both records are at those revisions
//     (servers.CreateRequest.Checked); a change meanwhile, or a refusal
//     decided on remembered records, is checked again over fresh reads,
//     so no create reads either record from etcd in the usual case and
//     every answer is the one fresh reads would give;
//   - the cold moves (server_moves.go: resize, confirmResize,
//     revertResize, migrate; package servers' move.go), os-migrations
//     and a server's migrations (migrations.go), and their instance
//     actions with Nova's events (instance_actions_moves.go), derived
//     from the Migration records;
//   - evacuate (server_evacuate.go; package servers' evacuate.go),
//     refused while the server's host is up, its instance action
//     "evacuate" with rebuild_server and compute_rebuild_instance.
//   - shelving (server_shelve.go: shelve, shelveOffload, unshelve with
//     2.77's zone and 2.91's host; package servers' shelve.go) and its
//     instance actions (instance_actions_shelve.go), recorded on the
//     instance.
//   - os-resetState (server_reset_state.go; package servers'
//     reset_state.go): ADMIN, active or error, the task cleared and a
//     "resetState" instance action; refused (409) while a move is in
//     flight, which Nova allows.
//
// Every route is also served below a project id (/v2.1/<project>/...,
// Nova's ProjectMapper; the id must be the token's project). Not
// served: /os-aggregates/{id}/images (2.81); the /v2 (2.0) mount.
//
// Authentication and policy (auth.go): below /v2.1/ every request needs
// a token, checked before routing as keystonemiddleware does (401 with
// WWW-Authenticate otherwise), in "keystone" mode by an
// identity.Verifier, in "noauth" mode (berth dev, tests) read as Nova's
// noauth2 reads it ("user:project"; the user "admin" is an admin; no
// token at all is the admin of project "admin"). Each route's policy
// column is enforced with Nova's new defaults: ADMIN is role admin,
// PROJECT_READER_OR_ADMIN and PROJECT_MEMBER_OR_ADMIN are admin or that
// role on the resource's project, the zero policy any valid token or a
// rule the handler checks where Nova's does (after a lookup, against
// the resource's project). auth_matrix_test.go checks every route of the
// table against every kind of caller, compared with Nova 26's router and
// policy engine (testdata/nova_policy.py): a new route gets its rows
// there.
//
// Every caller has a project, and what a project owns is its own; the
// empty project is no wildcard (a system-scoped token owns nothing):
//   - a server belongs to its creator's project and user (tenant_id,
//     user_id); a list without all_tenants is the caller's project's,
//     all_tenants is an admin's (403 otherwise); a non-admin asking for
//     another project's placed server, or its instance actions, is told
//     it does not exist (404: Nova reads instances project-scoped), for
//     one still a build request it is refused (403: Nova reads build
//     requests unscoped, then checks the policy); a reader neither
//     creates nor deletes;
//   - a server group belongs to its creator's project and user; a
//     non-admin lists and finds only its project's groups (another
//     project's is a 404);
//   - limits count the caller's project's servers and groups, another
//     project's only for an admin (tenant_id).
//
// # Servers: what Berth keeps, shows and refuses
//
// A server is a BuildRequest until the superconductor hands it to a
// cell, then an Instance (package servers). The view (servers_view.go)
// is views/servers.py member for member; Berth's statuses map to
// Nova's states as BUILD: building (scheduling while a build request,
// spawning on a host), power 0; ACTIVE: active, power 1 (RUNNING);
// ERROR: error, power 0; a delete in progress keeps its status with
// task_state deleting.
//
// The members of POST /servers Berth does not honour, and how each is
// answered (Nova's words for a reference to something that does not
// exist, or accepted where Nova would be satisfied and nothing follows):
//
//	member                       Berth's answer
//	name, flavorRef, imageRef    honoured (imageRef through the ImageCatalog; an
//	                             image it lacks: "Can not find requested image")
//	min_count, max_count         honoured: max_count servers (Berth has no quota;
//	                             over servers.MaxCount is Nova's 403 quota answer)
//	availability_zone            honoured, with "zone:host[:node]" and
//	                             "zone::node" as a forced host (admin; a zone
//	                             that does not hold the host is dropped, and the
//	                             scheduler skips its filters, as Nova does)
//	host, hypervisor_hostname    honoured from 2.74 (admin)
//	os:scheduler_hints           group, same_host, different_host honoured (uuids
//	                             only: they reach keys); others accepted, ignored
//	metadata, description        kept and shown
//	return_reservation_id        honoured
//	networks                     "none"/"auto" accepted (Berth has no networks);
//	                             a network: "Network <id> could not be found.";
//	                             a port: "Port id <id> could not be found."
//	key_name                     "Invalid key_name provided." (no key pairs)
//	security_groups              "default" accepted; others "Security group <name>
//	                             not found."
//	block_device_mapping(_v2)    an image source is the imageRef; a volume or
//	                             snapshot "Volume|Snapshot <id> could not be
//	                             found."; blank ones accepted and ignored
//	adminPass                    echoed in the 202 body (generated when absent)
//	accessIPv4/6, config_drive,  validated, accepted, not kept (shown as Nova
//	user_data, personality,      shows a server without them)
//	OS-DCF:diskConfig, tags,
//	trusted_image_certificates,
//	hostname (2.90)
//
// Known differences kept on purpose: Berth has no integer instance id,
// so instance_name is "instance-" and the uuid's first 8 hex digits and
// the database's "id" sort key is creation time then launch index;
// launched_at is the instance's last update while ACTIVE; regex filters
// use Go's RE2 (no look-arounds) and match without case, as MySQL's
// REGEXP on Nova's collation; instance action events end when the next
// begins (Berth records attempt starts only).
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
// agents), one of servers and instance actions
// (testdata/nova_servers.py), and one of the cold moves' refusals and
// os-migrations (testdata/nova_moves.py, with three compute hosts). The
// character classes of
// names and descriptions and the extra spec validators are generated
// from Nova's tables:
//
//go:generate sh -c "/usr/bin/python3 testdata/gen_charsets.py > charsets_gen.go && gofmt -w charsets_gen.go"
//go:generate sh -c "/usr/bin/python3 testdata/gen_extra_specs.py > extra_specs_gen.go && gofmt -w extra_specs_gen.go"
package compute
