"""Records who Nova 26 lets call each route of authMatrix, with its new defaults.

Run with Debian's python3-nova installed:
    /usr/bin/python3 nova_policy.py > nova_policy.json
nova-api's router (APIRouterV21), in-process over SQLite with
[oslo_policy] enforce_new_defaults = True (enforce_scope stays off, as in
Nova 26), answers each request of ROWS as each caller of CALLERS, every
(row, caller) on a fresh database holding the five m1 flavors and
project A's private flavor priv-a (shared with A, one extra spec),
aggregates 1 and 2, and project A's server group GROUP_OF_A, as
compute/auth_matrix_test.go seeds Berth (whose aggregate 1 also holds
compute-1, a compute host this router has no cell database for: see
UNRECORDED). The callers' roles are what keystonemiddleware passes for
a Keystone token: the implied ones too.
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
CONF.set_override("connection", "sqlite://", group="api_database")
CONF.set_override("connection", "sqlite://", group="database")
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
    # The quota driver reads the quotas tables of the main database.
    main_models.BASE.metadata.drop_all(main_db.get_engine())
    main_models.BASE.metadata.create_all(main_db.get_engine())
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
    objects.InstanceGroup(ctx, uuid=GROUP_OF_A, name="g-a", project_id=A, user_id=derived_id("user", "member-a"),
                          policy="anti-affinity", rules={}, members=[], hosts=[]).create()


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
]

# Callers not recorded for a row: the admin's add_host and remove_host
# pass the policy and then need a compute service in a cell database and
# a placement service, which this in-process router has not; the
# refusals before them are recorded.
UNRECORDED = {
    ('{"add_host": {"host": "compute-2"}}', "admin"),
    ('{"remove_host": {"host": "compute-1"}}', "admin"),
}

out = []
for method, path, body, headers in ROWS:
    for caller, (project, roles) in CALLERS.items():
        if (body, caller) in UNRECORDED:
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
