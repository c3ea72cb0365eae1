"""Records Nova 26's flavors API, run in-process with an SQLite database.

Run with Debian's python3-nova installed:
    /usr/bin/python3 nova_flavors.py > nova_flavors.json
nova-api's router (APIRouterV21) answers each request of SCENARIO in
order, as an admin of project 6f1a2c3d, after the five m1 flavors Berth
preloads were created as Berth has them. TestFlavorsMatchNova replays the
scenario against Berth and compares status, body and the type and
version headers.
"""
import json
import os
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
conf.write("[DEFAULT]\ntransport_url = fake:/\n")
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

models.BASE.metadata.create_all(api_db.get_engine())

import webob  # noqa: E402

from nova.api.openstack.compute import routes  # noqa: E402

APP = routes.APIRouterV21()
PROJECT = "6f1a2c3d"
KEEP = {"content-type", "openstack-api-version", "x-openstack-nova-api-version", "vary"}


def call(method, path, body=None, headers=None):
    req = webob.Request.blank(path, base_url="http://nova.test:8774/v2.1", method=method)
    if body is not None:
        req.body = body.encode()
        req.content_type = "application/json"
    for k, v in (headers or {}).items():
        req.headers[k] = v
    req.environ["nova.context"] = context.RequestContext("admin", PROJECT, is_admin=True, roles=["admin"])
    resp = req.get_response(APP)
    return resp


for fid, name, vcpus, ram, disk in [("1", "m1.tiny", 1, 512, 1), ("2", "m1.small", 1, 2048, 20),
                                     ("3", "m1.medium", 2, 4096, 40), ("4", "m1.large", 4, 8192, 80),
                                     ("5", "m1.xlarge", 8, 16384, 160)]:
    r = call("POST", "/flavors", json.dumps({"flavor": {"name": name, "vcpus": vcpus, "ram": ram, "disk": disk, "id": fid}}))
    assert r.status_int == 200, r.body


def mv(v):
    return {"OpenStack-API-Version": "compute " + v}


BIG = ('{"flavor": {"name": "b<i>&g \\u00e9", "ram": "1024", "vcpus": 2, "disk": 10, "id": "big", "swap": 512, '
       '"rxtx_factor": "2.5", "os-flavor-access:is_public": "false", "description": "for <tests>"}}')
SCENARIO = [
    ("GET", "/flavors", None, {}),
    ("GET", "/flavors/detail", None, {}),
    ("GET", "/flavors/detail", None, mv("2.55")),
    ("GET", "/flavors/detail", None, mv("2.61")),
    ("GET", "/flavors/detail?limit=2", None, mv("2.75")),
    ("GET", "/flavors/2", None, mv("2.1")),
    ("GET", "/flavors/2", None, mv("2.75")),
    ("GET", "/flavors/nope", None, {}),
    ("GET", "/flavors?minRam=4096", None, {}),
    ("GET", "/flavors?minDisk=80&minRam=1", None, {}),
    ("GET", "/flavors?sort_key=memory_mb&sort_dir=desc", None, {}),
    ("GET", "/flavors?sort_key=name", None, {}),
    ("GET", "/flavors?limit=2", None, {}),
    ("GET", "/flavors?limit=2&marker=2", None, {}),
    ("GET", "/flavors?limit=2&marker=4", None, {}),
    ("GET", "/flavors?limit=0", None, {}),
    ("GET", "/flavors?marker=99", None, {}),
    ("GET", "/flavors?limit=abc", None, {}),
    ("GET", "/flavors?minRam=1.5", None, {}),
    ("GET", "/flavors?is_public=maybe", None, {}),
    ("GET", "/flavors?is_public=false", None, {}),
    ("GET", "/flavors?is_public=none", None, {}),
    ("GET", "/flavors?sort_key=colour", None, {}),
    ("GET", "/flavors?colour=red", None, mv("2.74")),
    ("GET", "/flavors?colour=red", None, mv("2.75")),
    ("GET", "/flavors?offset=x", None, {}),
    ("POST", "/flavors", BIG, mv("2.75")),
    ("POST", "/flavors", '{"flavor": {"name": "other", "ram": 1, "vcpus": 1, "disk": 0, "id": "big"}}', {}),
    ("POST", "/flavors", '{"flavor": {"name": "m1.tiny", "ram": 1, "vcpus": 1, "disk": 0, "id": 77}}', {}),
    ("POST", "/flavors", '{"flavor": {"name": "d", "ram": 1, "vcpus": 1, "disk": 0, "description": "x"}}', mv("2.54")),
    ("POST", "/flavors", '{"flavor": {"name": "num", "ram": 1, "vcpus": 1, "disk": 0, "id": 10, "rxtx_factor": 1.5}}', {}),
    ("POST", "/flavors", '{"flavor": {"name": "f", "ram": 0, "vcpus": 1, "disk": 0}}', {}),
    ("POST", "/flavors", '{"flavor": {"name": " f", "ram": 1, "vcpus": 1, "disk": 0}}', {}),
    ("POST", "/flavors", '{"flavor": {"name": "f", "ram": 1, "vcpus": 1, "disk": 0, "rxtx_factor": 0.5}}', {}),
    ("POST", "/flavors", '{"flavor": ', {}),
    ("POST", "/flavors", None, {}),
    ("GET", "/flavors/big", None, mv("2.61")),
    ("GET", "/flavors/detail?is_public=false", None, mv("2.55")),
    ("PUT", "/flavors/big", '{"flavor": {"description": null}}', mv("2.55")),
    ("PUT", "/flavors/big", '{"flavor": {"description": "d"}}', mv("2.54")),
    ("PUT", "/flavors/nope", '{"flavor": {"description": "x"}}', mv("2.55")),
    ("PUT", "/flavors/big", '{"flavor": {"description": 1}}', mv("2.55")),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"hw:cpu_policy": "dedicated", "quota:n": 2.50}}', {}),
    ("GET", "/flavors/big/os-extra_specs", None, {}),
    ("PUT", "/flavors/big/os-extra_specs/quota:n", '{"quota:n": "3"}', {}),
    ("PUT", "/flavors/big/os-extra_specs/quota:n", '{"other": "3"}', {}),
    ("PUT", "/flavors/big/os-extra_specs/quota:n", '{"a": "1", "b": "2"}', {}),
    ("GET", "/flavors/big/os-extra_specs/quota:n", None, {}),
    ("DELETE", "/flavors/big/os-extra_specs/quota:n", None, {}),
    ("GET", "/flavors/big/os-extra_specs/quota:n", None, {}),
    ("DELETE", "/flavors/big/os-extra_specs/quota:n", None, {}),
    ("GET", "/flavors/nope/os-extra_specs", None, {}),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"a/b": "1"}}', {}),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"n": %s}}' % ("9" * 256), {}),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"hw:cpu_policy": "bogus"}}', {}),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"hw:cpu_policy": "bogus"}}', mv("2.86")),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"hw:numa_nodes": "x"}}', mv("2.86")),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"hw:numa_nodes": 0}}', mv("2.86")),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"hw:numa_nodes": " 2"}}', mv("2.86")),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"hw:mem_encryption": "maybe"}}', mv("2.86")),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"hw:unknown_thing": "1"}}', mv("2.86")),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"hw:numa_cpus.0": "0-1,^1"}}', mv("2.86")),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"hw:numa_cpus.x": "0"}}', mv("2.86")),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"trait:HW_CPU_X86_AVX": "required", "resources1:VCPU": "1"}}', mv("2.86")),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"trait:HW_CPU_X86_AVX": "maybe"}}', mv("2.86")),
    ("POST", "/flavors/big/os-extra_specs", '{"extra_specs": {"custom:anything": "1", "plain": "x"}}', mv("2.86")),
    ("PUT", "/flavors/big/os-extra_specs/hw:cpu_policy", '{"hw:cpu_policy": "shared"}', mv("2.86")),
    ("PUT", "/flavors/big/os-extra_specs/hw:cpu_policy", '{"hw:cpu_policy": "nope"}', mv("2.86")),
    ("GET", "/flavors/big/os-extra_specs", None, {}),
    ("GET", "/flavors/big", None, mv("2.75")),
    ("GET", "/flavors/big/os-flavor-access", None, {}),
    ("POST", "/flavors/big/action", '{"addTenantAccess": {"tenant": "6f1a2c3d"}}', {}),
    ("POST", "/flavors/big/action", '{"addTenantAccess": {"tenant": "6f1a2c3d"}}', {}),
    ("POST", "/flavors/big/action", '{"addTenantAccess": {"tenant": "p2"}}', {}),
    ("GET", "/flavors/big/os-flavor-access", None, {}),
    ("POST", "/flavors/2/action", '{"addTenantAccess": {"tenant": "p1"}}', mv("2.7")),
    ("GET", "/flavors/2/os-flavor-access", None, {}),
    ("GET", "/flavors", None, {}),
    ("GET", "/flavors?is_public=false", None, {}),
    ("POST", "/flavors/big/action", '{"removeTenantAccess": {"tenant": "p3"}}', {}),
    ("POST", "/flavors/big/action", '{"removeTenantAccess": {"tenant": "p2"}}', {}),
    ("POST", "/flavors/big/action", '{"addTenantAccess": {}}', {}),
    ("POST", "/flavors/big/action", '{"explode": {}}', {}),
    ("POST", "/flavors/big/action", '{"a": {}, "b": {}}', {}),
    ("GET", "/flavors", None, {}),
    ("DELETE", "/flavors/big", None, {}),
    ("DELETE", "/flavors/big", None, {}),
    ("DELETE", "/flavors/10", None, {}),
    ("GET", "/flavors/detail", None, mv("2.75")),
    ("GET", "/nothing", None, {}),
    ("GET", "/nothing", None, {"Accept": "application/json"}),
    ("PATCH", "/flavors/1", None, {}),
    ("POST", "/flavors", None, {"Content-Type": "application/xml"}),
    ("GET", "/", None, mv("2.0")),
    ("GET", "/", None, mv("2.42")),
]

out = []
for method, path, body, headers in SCENARIO:
    r = call(method, path, body, headers)
    out.append({"method": method, "path": "/v2.1" + path, "body": body, "headers": headers,
                "status": r.status_int,
                "response_headers": [[k, v] for k, v in r.headerlist if k.lower() in KEEP],
                "response_body": r.body.decode()})
json.dump(out, sys.stdout, indent=1)
sys.stdout.write("\n")
