"""Records Nova 26's own validation messages for the flavor schemas.

Run with Debian's python3-nova installed:
    /usr/bin/python3 nova_validation.py > nova_validation.json
Each case is [schema, microversion-independent body or query, message];
TestValidationMatchesNova checks Berth's message against the recording.
A query case validates req.GET.dict_of_lists() with is_body=False.
"""
import json
import sys

from nova.api.openstack.compute.schemas import flavor_access
from nova.api.openstack.compute.schemas import flavor_manage
from nova.api.openstack.compute.schemas import flavors
from nova.api.openstack.compute.schemas import flavors_extraspecs
from nova.api.validation import validators
from nova import exception

SCHEMAS = {
    "create": (flavor_manage.create, True),
    "create_v2_55": (flavor_manage.create_v2_55, True),
    "update_v2_55": (flavor_manage.update_v2_55, True),
    "extra_specs_create": (flavors_extraspecs.create, True),
    "extra_specs_update": (flavors_extraspecs.update, True),
    "add_tenant_access": (flavor_access.add_tenant_access, True),
    "remove_tenant_access": (flavor_access.remove_tenant_access, True),
    "index_query": (flavors.index_query, False),
    "index_query_275": (flavors.index_query_275, False),
}


def flavor(**kw):
    f = {"name": "f", "ram": 1, "vcpus": 1, "disk": 0}
    f.update(kw)
    return {"flavor": f}


CASES = [
    ("create", None),
    ("create", []),
    ("create", {}),
    ("create", {"flavor": {"name": "f"}}),
    ("create", {"flavor": {"name": "f", "ram": 1, "vcpus": 1}}),
    ("create", {"flavor": {"ram": 1, "vcpus": 1, "disk": 0}}),
    ("create", flavor(name="")),
    ("create", flavor(name=" lead")),
    ("create", flavor(name="trail ")),
    ("create", flavor(name="tab\there")),
    ("create", flavor(name=5)),
    ("create", flavor(name="x" * 256)),
    ("create", flavor(ram=0)),
    ("create", flavor(ram="0")),
    ("create", flavor(ram=-1)),
    ("create", flavor(ram="-1")),
    ("create", flavor(ram=1.5)),
    ("create", flavor(ram=True)),
    ("create", flavor(ram="abc")),
    ("create", flavor(ram=2147483648)),
    ("create", flavor(ram="2147483648")),
    ("create", flavor(vcpus=None)),
    ("create", flavor(disk=-1)),
    ("create", flavor(swap=-1)),
    ("create", flavor(**{"OS-FLV-EXT-DATA:ephemeral": "x"})),
    ("create", flavor(id="")),
    ("create", flavor(id=" x")),
    ("create", flavor(id="a/b")),
    ("create", flavor(id=True)),
    ("create", flavor(id=[1])),
    ("create", flavor(rxtx_factor=0)),
    ("create", flavor(rxtx_factor=0.5)),
    ("create", flavor(rxtx_factor="0.0")),
    ("create", flavor(rxtx_factor="abc")),
    ("create", flavor(rxtx_factor=-1)),
    ("create", flavor(rxtx_factor=4e38)),
    ("create", flavor(**{"os-flavor-access:is_public": "maybe"})),
    ("create", flavor(**{"os-flavor-access:is_public": 1})),
    ("create", flavor(description="d")),
    ("create", flavor(foo=1)),
    ("create", flavor(foo=1, bar=2)),
    ("create", {"flavor": flavor()["flavor"], "extra": 1}),
    ("create", {"flavor": "x"}),
    ("create", flavor(name="It's")),
    ("create", flavor(name="caf\u00e9\u0007")),
    ("create", flavor(name="abc\n")),
    ("create", flavor(name="\n")),
    ("create", flavor(name="a\u00a0b")),
    ("create", flavor(name="\u00a0a")),
    ("create", flavor(name="a\u2028b")),
    ("create", flavor(name="a\u0378")),
    ("create", flavor(name="smile \U0001F600")),
    ("create", flavor(name="\u4e2d\u6587")),
    ("create_v2_55", flavor(description="bad\x07")),
    ("create_v2_55", flavor(description="ok\n")),
    ("create_v2_55", flavor(description=" spaces\u00a0ok ")),
    ("create_v2_55", flavor(description=5)),
    ("create_v2_55", flavor(description="x" * 65536)),
    ("update_v2_55", {"flavor": {}}),
    ("update_v2_55", {"flavor": {"description": 1}}),
    ("update_v2_55", {"flavor": {"description": "d", "name": "n"}}),
    ("extra_specs_create", {}),
    ("extra_specs_create", {"extra_specs": []}),
    ("extra_specs_create", {"extra_specs": {"a/b": "1"}}),
    ("extra_specs_create", {"extra_specs": {"a/b": "1", "c/d": "2"}}),
    ("extra_specs_create", {"extra_specs": {"k": None}}),
    ("extra_specs_create", {"extra_specs": {"k": True}}),
    ("extra_specs_create", {"extra_specs": {"k": "v" * 256}}),
    ("extra_specs_update", {}),
    ("extra_specs_update", {"a": "1", "b": "2"}),
    ("extra_specs_update", {"a": {}}),
    ("add_tenant_access", {}),
    ("add_tenant_access", {"addTenantAccess": {}}),
    ("add_tenant_access", {"addTenantAccess": {"tenant": ""}}),
    ("add_tenant_access", {"addTenantAccess": {"tenant": 5}}),
    ("add_tenant_access", {"addTenantAccess": {"tenant": "p", "x": 1}}),
    ("remove_tenant_access", {"removeTenantAccess": {"tenant": "x" * 256}}),
    ("index_query", {"limit": ["abc"]}),
    ("index_query", {"limit": [""]}),
    ("index_query", {"limit": ["-1"]}),
    ("index_query", {"sort_key": ["bogus"]}),
    ("index_query", {"sort_dir": ["up"]}),
    ("index_query", {"foo": ["1"]}),
    ("index_query_275", {"foo": ["1"]}),
    ("index_query_275", {"foo": ["1"], "bar": ["2"]}),
]

out = []
for name, inst in CASES:
    sch, is_body = SCHEMAS[name]
    try:
        validators._SchemaValidator(sch, is_body=is_body).validate(inst)
        msg = None
    except exception.ValidationError as e:
        msg = e.format_message()
    out.append([name, inst, msg])
json.dump(out, sys.stdout, indent=1)
sys.stdout.write("\n")
