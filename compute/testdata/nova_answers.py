"""Records answers of Nova 26's own WSGI code, without a database.

Run with Debian's python3-nova installed:
    /usr/bin/python3 nova_answers.py > nova_answers.json
The version apps answer as nova-api's paste pipeline mounts them (the
root at /, VersionsV2 at /v2.1, which negotiates the microversion), and
ViewBuilder.show renders m1.small as a flavor object per microversion,
serialized by wsgi.JSONDictSerializer. TestAnswersMatchNova compares.
"""
import json
import sys

import webob

from nova.api.openstack import api_version_request as avr
from nova.api.openstack.compute import versions
from nova.api.openstack.compute.views import flavors as flavors_view
from nova.api.openstack import wsgi
from nova import context
from nova import objects

objects.register_all()
HOST = "http://nova.test:8774"
KEEP = {"content-type", "openstack-api-version", "x-openstack-nova-api-version", "vary"}
out = []


def record(name, app, path, script="", headers=None):
    req = webob.Request.blank(path, base_url=HOST + script)
    for k, v in (headers or {}).items():
        req.headers[k] = v
    resp = req.get_response(app)
    out.append({"name": name, "path": script + path, "headers": headers or {},
                "status": resp.status_int,
                "response_headers": [[k, v] for k, v in resp.headerlist if k.lower() in KEEP],
                "body": resp.body.decode()})


root = versions.Versions.factory({})
v2 = versions.VersionsV2.factory({})
record("root", root, "/")
record("multiple choices", root, "/nothing")
record("v2.1 default", v2, "/", "/v2.1")
for ver in ["compute 2.50", "compute latest", "compute 2.0", "compute 2.94", "compute 3.0",
            "compute 2.01", "compute abc", "placement 1.5"]:
    record("v2.1 " + ver, v2, "/", "/v2.1", {"OpenStack-API-Version": ver})
record("v2.1 legacy 2.5", v2, "/", "/v2.1", {"X-OpenStack-Nova-API-Version": "2.5"})

small = objects.Flavor(flavorid="2", name="m1.small", memory_mb=2048, root_gb=20, swap=0,
                       ephemeral_gb=0, disabled=False, vcpus=1, is_public=True,
                       rxtx_factor=1.0, description=None, extra_specs={})
for ver in ["2.1", "2.54", "2.55", "2.61", "2.74", "2.75", "2.93"]:
    req = wsgi.Request.blank("/flavors/2", base_url=HOST + "/v2.1")
    req.api_version_request = avr.APIVersionRequest(ver)
    req.environ["nova.context"] = context.RequestContext("u", "6f1a2c3d", is_admin=True)  # a project id the URL does not contain (see _get_project_id)
    v = req.api_version_request
    d = flavors_view.ViewBuilder().show(
        req, small, include_description=v >= avr.APIVersionRequest("2.55"),
        include_extra_specs=v >= avr.APIVersionRequest("2.61"))
    out.append({"name": "flavor show " + ver, "path": "/v2.1/flavors/2",
                "headers": {"OpenStack-API-Version": "compute " + ver}, "status": 200,
                "response_headers": None,
                "body": wsgi.JSONDictSerializer().serialize(d)})
json.dump(out, sys.stdout, indent=1)
sys.stdout.write("\n")
