"""Records who Nova 26 lets call each route of authMatrix, with its new defaults.

Run with Debian's python3-nova installed:
    /usr/bin/python3 nova_policy.py > nova_policy.json
nova-api's router (APIRouterV21), in-process over SQLite with
[oslo_policy] enforce_new_defaults = True (enforce_scope stays off, as in
Nova 26), answers each request of ROWS as each caller of CALLERS, every
(row, caller) on a fresh database holding the five m1 flavors and
project A's private flavor priv-a (shared with A, one extra spec),
aggregates 1 and 2, project A's server group GROUP_OF_A, and in cell1
(the main database, a file) the compute hosts compute-1 and compute-2
and project A's servers SERVER_OF_A (ACTIVE on compute-1) and
BUILDING_OF_A (a build request), as compute/auth_matrix_test.go seeds
Berth (whose aggregate 1 also holds compute-1). What this router cannot
answer without the services around it (Glance, Placement, a compute
service's RPC) is not recorded: see UNRECORDED and UNRECORDED_AT. The
callers' roles are what keystonemiddleware passes for a Keystone token:
the implied ones too.
TestAuthMatrixMatchesNova compares the statuses with authMatrix's.
"""
import hashlib
import json
import os
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
conf.write("[DEFAULT]\ntransport_url = fake:/\n[oslo_policy]\nenforce_new_defaults = True\n")
conf.close()

import nova.conf  # noqa: E402
from nova import context  # noqa: E402
from nova import objects  # noqa: E402

CONF = nova.conf.CONF
CONF(["--config-file", conf.name], project="nova", default_config_files=[])
os.unlink(conf.name)
# Files: the main database is cell1's too, which Nova reads through an
# engine of its own, so servers, services and compute nodes can be
# seeded where its router looks for them.
DB_DIR = tempfile.mkdtemp()
CONF.set_override("connection", "sqlite:///" + os.path.join(DB_DIR, "api.db"), group="api_database")
CELL_DB = "sqlite:///" + os.path.join(DB_DIR, "cell1.db")
CONF.set_override("connection", CELL_DB, group="database")
objects.register_all()

import oslo_messaging  # noqa: E402
from nova import rpc  # noqa: E402

oslo_messaging.set_transport_defaults("nova")
rpc.init(CONF)

from nova.db.api import api as api_db  # noqa: E402
from nova.db.api import models  # noqa: E402
from nova.db.main import api as main_db  # noqa: E402
from nova.db.main import models as main_models  # noqa: E402
import webob  # noqa: E402

from nova.api.openstack.compute import routes  # noqa: E402
from nova import policy  # noqa: E402

APP = routes.APIRouterV21()
api_db.configure(CONF)  # else the API database's engine is [database]'s
main_models.BASE.metadata.create_all(main_db.get_engine())


def derived_id(kind, name):
    """identity.DerivedID: the ids Berth gives users and projects."""
    return hashlib.sha256(("berth-identity:%s:%s" % (kind, name)).encode()).hexdigest()[:32]


A, B, C = derived_id("project", "A"), derived_id("project", "B"), derived_id("project", "C")
CALLERS = {
    "reader of A": (A, ["reader"]),
    "member of B": (B, ["member", "reader"]),
    "member of A": (A, ["member", "reader"]),
    "admin": (C, ["admin", "member", "reader"]),
}
OWNED = "priv-a"
GROUP_OF_A = "a0a0a0a0-1111-4222-8333-444444444444"
SLEEPER = "7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f60"  # sleeperID: an image only Berth's test catalog holds


def call(method, path, body, headers, project, roles):
    req = webob.Request.blank(path, base_url="http://nova.test:8774/v2.1", method=method)
    if body is not None:
        req.body = body.encode()
        req.content_type = "application/json"
    for k, v in (headers or {}).items():
        req.headers[k] = v
    # is_admin left to Nova: policy.check_is_admin, role:admin.
    req.environ["nova.context"] = context.RequestContext("u-" + project[:6], project, roles=roles)
    return req.get_response(APP)


ADMIN = (C, ["admin", "member", "reader"])


def fresh():
    models.BASE.metadata.drop_all(api_db.get_engine())
    models.BASE.metadata.create_all(api_db.get_engine())
    # The quota driver reads the quotas tables of the main database,
    # which is cell1's too: emptied, as a file's schema is made once.
    with main_db.get_engine().begin() as conn:
        for table in reversed(main_models.BASE.metadata.sorted_tables):
            conn.execute(table.delete())
    for fid, name, vcpus, ram, disk in [("1", "m1.tiny", 1, 512, 1), ("2", "m1.small", 1, 2048, 20),
                                         ("3", "m1.medium", 2, 4096, 40), ("4", "m1.large", 4, 8192, 80),
                                         ("5", "m1.xlarge", 8, 16384, 160)]:
        r = call("POST", "/flavors", json.dumps({"flavor": {"name": name, "vcpus": vcpus, "ram": ram, "disk": disk, "id": fid}}), {}, *ADMIN)
        assert r.status_int == 200, r.body
    for method, path, body in [
        ("POST", "/flavors", json.dumps({"flavor": {"name": OWNED, "id": OWNED, "ram": 512, "vcpus": 1, "disk": 1, "os-flavor-access:is_public": False}})),
        ("POST", "/flavors/%s/action" % OWNED, json.dumps({"addTenantAccess": {"tenant": A}})),
        ("POST", "/flavors/%s/os-extra_specs" % OWNED, '{"extra_specs": {"hw:cpu_policy": "shared"}}'),
    ]:
        r = call(method, path, body, {}, *ADMIN)
        assert r.status_int == 200, (path, r.body)
    for name in ["agg1", "agg2"]:
        r = call("POST", "/os-aggregates", json.dumps({"aggregate": {"name": name}}), {}, *ADMIN)
        assert r.status_int == 200, r.body
    ctx = context.RequestContext("u-" + A[:6], A, roles=["member", "reader"])
    seed_cell(ctx)
    objects.InstanceGroup(ctx, uuid=GROUP_OF_A, name="g-a", project_id=A, user_id=derived_id("user", "member-a"),
                          policy="anti-affinity", rules={}, members=[], hosts=[]).create()


CELL1 = "c1c1c1c1-0000-4000-8000-000000000001"
SERVER_OF_A = "a1a1a1a1-2222-4333-8444-555555555555"
BUILDING_OF_A = "a2a2a2a2-2222-4333-8444-555555555555"
CREATE_OF_A = "req-" + SERVER_OF_A


def seed_cell(ctx):
    """cell1 with compute-1 and compute-2 (service and compute node) and
    project A's servers, as seedMatrixCompute makes them in Berth:
    SERVER_OF_A ACTIVE on compute-1 (created by request CREATE_OF_A),
    BUILDING_OF_A still a build request."""
    from oslo_utils import timeutils, uuidutils
    from nova.network import model as network_model
    admin = context.get_admin_context()
    cell = objects.CellMapping(admin, uuid=CELL1, name="cell1",
                               database_connection=CELL_DB, transport_url="fake:/")
    cell.create()
    flavor = objects.Flavor.get_by_flavor_id(admin, "1")
    with context.target_cell(admin, cell) as cctxt:
        for host in ["compute-1", "compute-2"]:
            objects.Service(cctxt, host=host, binary="nova-compute", topic="compute", report_count=0).create()
            objects.ComputeNode(cctxt, host=host, hypervisor_hostname=host, vcpus=16, memory_mb=65536, local_gb=1000,
                                vcpus_used=0, memory_mb_used=0, local_gb_used=0, hypervisor_type="fake",
                                hypervisor_version=1000, cpu_info="{}", uuid=uuidutils.generate_uuid()).create()
            objects.HostMapping(admin, host=host, cell_mapping=cell).create()
        user = derived_id("user", "member-a")
        actx = context.RequestContext(user, A, request_id=CREATE_OF_A)
        with context.target_cell(actx, cell) as acell:
            inst = objects.Instance(acell, uuid=SERVER_OF_A, project_id=A, user_id=user, display_name="s-a1",
                                    vm_state="active", power_state=1, host="compute-1", node="compute-1",
                                    availability_zone="nova", flavor=flavor, instance_type_id=flavor.id,
                                    memory_mb=512, vcpus=1, root_gb=1, ephemeral_gb=0, launch_index=0,
                                    reservation_id="r-a1a1a1a1",
                                    info_cache=objects.InstanceInfoCache(network_info=network_model.NetworkInfo()))
            inst.create()
            objects.InstanceAction.action_start(acell, SERVER_OF_A, "create", want_result=False)
        objects.InstanceMapping(admin, instance_uuid=SERVER_OF_A, cell_mapping=cell, project_id=A, user_id=user).create()
        building = objects.Instance(admin, uuid=BUILDING_OF_A, project_id=A, user_id=user, display_name="s-a2",
                                    vm_state="building", task_state="scheduling", power_state=0,
                                    flavor=flavor, instance_type_id=flavor.id, memory_mb=512, vcpus=1, root_gb=1,
                                    ephemeral_gb=0, launch_index=0, reservation_id="r-a2a2a2a2", metadata={},
                                    system_metadata={}, tags=objects.TagList(), availability_zone=None,
                                    access_ip_v4=None, access_ip_v6=None, host=None, node=None, launched_at=None,
                                    terminated_at=None, key_name=None, config_drive="", locked=False, locked_by=None,
                                    hostname="s-a2", display_description=None, progress=0, image_ref="",
                                    kernel_id="", ramdisk_id="", root_device_name=None, user_data=None,
                                    created_at=timeutils.utcnow(), updated_at=None, deleted=False,
                                    security_groups=objects.SecurityGroupList(), trusted_certs=None,
                                    info_cache=objects.InstanceInfoCache(network_info=network_model.NetworkInfo()))
        objects.BuildRequest(admin, instance=building, instance_uuid=BUILDING_OF_A, project_id=A,
                             block_device_mappings=objects.BlockDeviceMappingList(), tags=objects.TagList()).create()
        objects.InstanceMapping(admin, instance_uuid=BUILDING_OF_A, cell_mapping=None, project_id=A, user_id=user).create()


def mv(v):
    return {"OpenStack-API-Version": "compute " + v}


# The rows of authMatrix (compute/auth_matrix_test.go) for the routes
# Nova's API has: method, path below /v2.1, body, headers.
ROWS = [
    ("GET", "/", None, {}),
    ("GET", "/versions/v2.1", None, {}),
    ("GET", "/no-such-route", None, {}),
    ("GET", "/flavors", None, {}),
    ("GET", "/flavors/detail", None, {}),
    ("POST", "/flavors", '{"flavor": {"name": "new", "ram": 512, "vcpus": 1, "disk": 1}}', {}),
    ("GET", "/flavors/" + OWNED, None, {}),
    ("GET", "/flavors/1", None, {}),
    ("PUT", "/flavors/" + OWNED, '{"flavor": {"description": "d"}}', mv("2.55")),
    ("DELETE", "/flavors/" + OWNED, None, {}),
    ("POST", "/flavors/%s/action" % OWNED, '{"addTenantAccess": {"tenant": "someone"}}', {}),
    ("POST", "/flavors/%s/action" % OWNED, '{"removeTenantAccess": {"tenant": "%s"}}' % A, {}),
    ("GET", "/flavors/%s/os-extra_specs" % OWNED, None, {}),
    ("POST", "/flavors/%s/os-extra_specs" % OWNED, '{"extra_specs": {"hw:cpu_policy": "dedicated"}}', {}),
    ("GET", "/flavors/%s/os-extra_specs/hw:cpu_policy" % OWNED, None, {}),
    ("PUT", "/flavors/%s/os-extra_specs/hw:cpu_policy" % OWNED, '{"hw:cpu_policy": "dedicated"}', {}),
    ("DELETE", "/flavors/%s/os-extra_specs/hw:cpu_policy" % OWNED, None, {}),
    ("GET", "/flavors/%s/os-flavor-access" % OWNED, None, {}),
    ("GET", "/limits", None, {}),
    ("GET", "/limits?tenant_id=" + A, None, {}),
    ("GET", "/os-aggregates", None, {}),
    ("POST", "/os-aggregates", '{"aggregate": {"name": "new"}}', {}),
    ("GET", "/os-aggregates/1", None, {}),
    ("PUT", "/os-aggregates/1", '{"aggregate": {"name": "renamed"}}', {}),
    ("DELETE", "/os-aggregates/2", None, {}),
    ("POST", "/os-aggregates/1/action", '{"add_host": {"host": "compute-2"}}', {}),
    ("POST", "/os-aggregates/1/action", '{"remove_host": {"host": "compute-1"}}', {}),
    ("POST", "/os-aggregates/1/action", '{"set_metadata": {"metadata": {"k": "v"}}}', {}),
    ("GET", "/os-server-groups", None, {}),
    ("GET", "/os-server-groups?all_projects", None, {}),
    ("POST", "/os-server-groups", '{"server_group": {"name": "new", "policies": ["anti-affinity"]}}', {}),
    ("GET", "/os-server-groups/" + GROUP_OF_A, None, {}),
    ("DELETE", "/os-server-groups/" + GROUP_OF_A, None, {}),
    ("GET", "/os-availability-zone", None, {}),
    ("GET", "/os-availability-zone/detail", None, {}),
    ("GET", "/os-hypervisors", None, {}),
    ("GET", "/os-hypervisors/detail", None, {}),
    ("GET", "/os-hypervisors/statistics", None, {}),
    ("GET", "/os-hypervisors/999999", None, {}),
    ("GET", "/os-hypervisors/compute/search", None, {}),
    ("GET", "/os-hypervisors/compute-1/servers", None, {}),
    ("GET", "/os-hypervisors/999999/uptime", None, {}),
    ("GET", "/os-services", None, {}),
    ("PUT", "/os-services/disable", '{"host": "compute-1", "binary": "nova-compute"}', {}),
    ("DELETE", "/os-services/999999", None, {}),
    ("GET", "/servers", None, {}),
    ("GET", "/servers/detail", None, {}),
    ("GET", "/servers?all_tenants=1", None, {}),
    ("GET", "/servers/detail?all_tenants=1", None, {}),
    ("POST", "/servers", '{"server": {"name": "new", "flavorRef": "1", "imageRef": "%s"}}' % SLEEPER, {}),
    ("GET", "/servers/" + SERVER_OF_A, None, {}),
    ("GET", "/servers/" + BUILDING_OF_A, None, {}),
    ("DELETE", "/servers/" + SERVER_OF_A, None, {}),
    ("DELETE", "/servers/" + BUILDING_OF_A, None, {}),
    ("POST", "/servers/%s/action" % SERVER_OF_A, '{"shelve": null}', {}),
    ("POST", "/servers/%s/action" % SERVER_OF_A, '{"shelveOffload": null}', {}),
    ("POST", "/servers/%s/action" % SERVER_OF_A, '{"unshelve": null}', {}),
    ("GET", "/servers/%s/os-instance-actions" % SERVER_OF_A, None, {}),
    ("GET", "/servers/%s/os-instance-actions/%s" % (SERVER_OF_A, CREATE_OF_A), None, {}),
]

# Callers not recorded for a row: the admin's add_host and remove_host
# pass the policy and then need a compute service in a cell database and
# a placement service, which this in-process router has not; the
# refusals before them are recorded.
UNRECORDED = {
    ('{"add_host": {"host": "compute-2"}}', "admin"),
    ('{"remove_host": {"host": "compute-1"}}', "admin"),
    # shelve and unshelve past their policy: SERVER_OF_A has no
    # launched_at, so check_instance_state's must_have_launched answers
    # 409 for shelve, and unshelve's block_extended_resource_request
    # calls Neutron (500 here); shelveOffload's 409 for an ACTIVE server
    # is recorded.
    ('{"shelve": null}', "member of A"),
    ('{"shelve": null}', "admin"),
    ('{"unshelve": null}', "member of A"),
    ('{"unshelve": null}', "admin"),
}

# (method, path, caller) not recorded, each for what this in-process
# router lacks:
#   - a server create past its policy calls Glance for the image;
#   - a view of A's servers: this recording seeds each instance with the
#     fields its router reads, not the whole object a real create makes
#     (the build request's lazy loads fail), so the 200s of show and
#     detail are not Nova's to compare; list refusals and 404s are;
#   - deleting the build request calls Placement and Neutron through
#     keystoneauth, which has no endpoints here;
#   - disabling compute-1 (os-services, before 2.53) waits for the
#     compute service's RPC answer that the fake transport never gives.
SEE_A = ["reader of A", "member of A", "admin"]
UNRECORDED_AT = (
    {("POST", "/servers", c) for c in ["member of B", "member of A", "admin"]}
    | {("GET", "/servers/" + s, c) for s in [SERVER_OF_A, BUILDING_OF_A] for c in SEE_A}
    | {("GET", "/servers/detail", c) for c in ["reader of A", "member of A"]}
    | {("GET", "/servers/detail?all_tenants=1", "admin")}
    | {("DELETE", "/servers/" + BUILDING_OF_A, c) for c in ["member of A", "admin"]}
    | {("PUT", "/os-services/disable", "admin")}
)

out = []
for method, path, body, headers in ROWS:
    for caller, (project, roles) in CALLERS.items():
        if (body, caller) in UNRECORDED or (method, path, caller) in UNRECORDED_AT:
            continue
        fresh()
        policy.reset()
        r = call(method, path, body, headers, project, roles)
        rec = {"method": method, "path": path, "body": body or "", "headers": headers, "caller": caller,
               "status": r.status_int}
        if r.status_int == 403:
            rec["response_body"] = r.body.decode()
        out.append(rec)
json.dump(out, sys.stdout, indent=1)
sys.stdout.write("\n")
