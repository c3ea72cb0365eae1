"""Records Nova 26's own validation messages for the servers schemas.

Run with Debian's python3-nova installed:
    /usr/bin/python3 nova_servers_validation.py > nova_servers_validation.json
Each case is [schema, body or query, message]: the create schemas of the
microversions that change them and the list query schemas.
TestServerValidationMatchesNova checks Berth's message against it. (From
2.73 the sort_key enum is built from a Python set, whose order changes
with the hash seed: no case lists it.)
"""
import json
import sys
import warnings

warnings.filterwarnings("ignore")

from nova.api.openstack.compute.schemas import instance_actions  # noqa: E402
from nova.api.openstack.compute.schemas import servers  # noqa: E402
from nova.api.validation import validators  # noqa: E402
from nova import exception  # noqa: E402

SCHEMAS = {
    "create_2.1": (servers.create, True),
    "create_2.19": (servers.create_v219, True),
    "create_2.37": (servers.create_v237, True),
    "create_2.74": (servers.create_v274, True),
    "create_2.90": (servers.create_v290, True),
    "query_2.1": (servers.query_params_v21, False),
    "query_2.66": (servers.query_params_v266, False),
    "query_2.75": (servers.query_params_v275, False),
    "actions_query_2.58": (instance_actions.list_query_params_v258, False),
    "actions_query_2.66": (instance_actions.list_query_params_v266, False),
}

IMG = "7b2e9d40-1f6a-4c1b-9a57-0b3c2d4e5f60"


def srv(**kw):
    s = {"name": "web", "flavorRef": "1", "imageRef": IMG}
    s.update(kw)
    return {"server": s}


def srv237(**kw):
    return srv(networks="none", **kw)


CASES = [
    ("create_2.1", {}),
    ("create_2.1", []),
    ("create_2.1", {"server": "x"}),
    ("create_2.1", {"server": {"name": "x"}}),
    ("create_2.1", {"server": {"flavorRef": "1"}}),
    ("create_2.1", srv()),
    ("create_2.1", srv(name="")),
    ("create_2.1", srv(name=" lead")),
    ("create_2.1", srv(name="x" * 256)),
    ("create_2.1", srv(name=5)),
    ("create_2.1", srv(flavorRef="")),
    ("create_2.1", srv(flavorRef=1)),
    ("create_2.1", srv(flavorRef=None)),
    ("create_2.1", srv(imageRef="")),
    ("create_2.1", srv(imageRef="cirros")),
    ("create_2.1", srv(imageRef=IMG.upper())),
    ("create_2.1", srv(imageRef=5)),
    ("create_2.1", srv(colour="red")),
    ("create_2.1", srv(colour="red", size=1)),
    ("create_2.1", {"server": srv()["server"], "extra": 1}),
    ("create_2.1", srv(min_count=0)),
    ("create_2.1", srv(min_count="0")),
    ("create_2.1", srv(min_count="two")),
    ("create_2.1", srv(min_count=1.5)),
    ("create_2.1", srv(max_count="3")),
    ("create_2.1", srv(metadata={"a/b": "1"})),
    ("create_2.1", srv(metadata={"k": 1})),
    ("create_2.1", srv(metadata={"k": "v" * 256})),
    ("create_2.1", srv(metadata=[])),
    ("create_2.1", srv(availability_zone="")),
    ("create_2.1", srv(availability_zone="nova:compute-1")),
    ("create_2.1", srv(return_reservation_id="maybe")),
    ("create_2.1", srv(return_reservation_id=True)),
    ("create_2.1", srv(security_groups=[{"name": "default", "id": 1}])),
    ("create_2.1", srv(security_groups="default")),
    ("create_2.1", srv(networks="none")),
    ("create_2.1", srv(networks=[{"uuid": "net"}])),
    ("create_2.1", srv(networks=[{"port": "nope"}])),
    ("create_2.1", srv(networks=[{"fixed_ip": "10.0.0.300"}])),
    ("create_2.1", srv(description="d")),
    ("create_2.1", srv(key_name="")),
    ("create_2.1", srv(config_drive="perhaps")),
    ("create_2.1", srv(user_data="not base64!")),
    ("create_2.1", srv(accessIPv4="1.2.3")),
    ("create_2.1", srv(**{"OS-DCF:diskConfig": "SOMETIMES"})),
    ("create_2.1", srv(host="compute-1")),
    ("create_2.1", {"server": srv()["server"], "os:scheduler_hints": {"group": "g/members/x"}}),
    ("create_2.1", {"server": srv()["server"], "os:scheduler_hints": {"group": IMG}}),
    ("create_2.1", {"server": srv()["server"], "os:scheduler_hints": {"group": 5}}),
    ("create_2.1", {"server": srv()["server"], "os:scheduler_hints": {"same_host": "a/b"}}),
    ("create_2.1", {"server": srv()["server"], "os:scheduler_hints": {"same_host": ["a/b"]}}),
    ("create_2.1", {"server": srv()["server"], "os:scheduler_hints": {"different_host": "a/b"}}),
    ("create_2.1", {"server": srv()["server"], "os:scheduler_hints": {"different_host": [IMG, "x"]}}),
    ("create_2.1", {"server": srv()["server"], "os:scheduler_hints": {"anything": [1]}}),
    ("create_2.1", {"server": srv()["server"], "os:scheduler_hints": "group"}),
    ("create_2.1", {"server": srv()["server"], "OS-SCH-HNT:scheduler_hints": {"group": "x"}}),
    ("create_2.19", srv(description="d")),
    ("create_2.19", srv(description=None)),
    ("create_2.19", srv(description="x" * 256)),
    ("create_2.19", srv(description="bell\x07")),
    ("create_2.37", srv()),
    ("create_2.37", srv237()),
    ("create_2.37", srv(networks="auto")),
    ("create_2.37", srv(networks="some")),
    ("create_2.37", srv(networks=[{"uuid": "net"}])),
    ("create_2.37", srv(networks=[{"uuid": IMG, "tag": "t"}])),
    ("create_2.74", srv237(host="compute-1", hypervisor_hostname="compute-1")),
    ("create_2.74", srv237(host="compute 1")),
    ("create_2.74", srv237(host="")),
    ("create_2.74", srv237(hypervisor_hostname="h/1")),
    ("create_2.90", srv237(hostname="web-1")),
    ("create_2.90", srv237(hostname="-web")),
    ("create_2.90", srv237(hostname="w")),
    ("query_2.1", {"name": [""]}),
    ("query_2.1", {"name": ["("]}),
    ("query_2.1", {"name": ["^web"]}),
    ("query_2.1", {"status": ["ACTIVE", "ERROR"]}),
    ("query_2.1", {"changes-since": ["yesterday"]}),
    ("query_2.1", {"changes-since": ["2026-01-02T03:04:05Z"]}),
    ("query_2.1", {"changes-since": ["2026-01-02 03:04"]}),
    ("query_2.1", {"changes-since": ["2026-13-02"]}),
    ("query_2.1", {"changes-before": ["yesterday"]}),
    ("query_2.1", {"limit": ["-1"]}),
    ("query_2.1", {"limit": [""]}),
    ("query_2.1", {"limit": ["ten"]}),
    ("query_2.1", {"sort_key": ["nope"]}),
    ("query_2.1", {"sort_key": ["vcpus"]}),
    ("query_2.1", {"foo": ["bar"]}),
    ("query_2.1", {"_hidden": ["x"]}),
    ("query_2.1", {"host": ["a", "b"]}),
    ("query_2.66", {"changes-before": ["yesterday"]}),
    ("query_2.66", {"tags": ["("]}),
    ("query_2.75", {"foo": ["bar"]}),
    ("query_2.75", {"foo": ["bar"], "baz": ["1"]}),
    ("query_2.75", {"locked": ["true"]}),
    ("actions_query_2.58", {"limit": ["1", "2"]}),
    ("actions_query_2.58", {"limit": ["-1"]}),
    ("actions_query_2.58", {"foo": ["1"]}),
    ("actions_query_2.58", {"changes-before": ["2026-01-01"]}),
    ("actions_query_2.58", {"changes-since": ["soon"]}),
    ("actions_query_2.66", {"changes-before": ["2026-01-01"]}),
    ("actions_query_2.66", {"marker": ["a", "b"]}),
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
