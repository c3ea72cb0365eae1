"""Records the real Nova 26 answering os-aggregates, os-server-groups and limits.

Unlike nova_flavors.py this needs the running reference (add_host needs
real compute services), started fresh with two compute hosts:

    /work/shared/reference/nova/start-nova.sh /tmp/ref-nova --computes 2 --base-port 18900
    /usr/bin/python3 nova_aggregates.py http://127.0.0.1:18904/v2.1 > nova_aggregates.json
    /work/shared/reference/nova/stop-nova.sh /tmp/ref-nova

Every request of SCENARIO is sent as the admin of project "admin"
(noauth2's X-Auth-Token: admin). A path or body may name {a1}-style
placeholders, filled from the answers of earlier steps ("save": name ->
dotted path into the answer's JSON). The answers are recorded as sent;
TestAggregatesMatchNova replays the same templates against Berth, fills
the placeholders from Berth's own answers, and compares both after
normalising uuids and timestamps.
"""
import json
import sys
import urllib.error
import urllib.request

BASE = sys.argv[1].rstrip("/")
KEEP = {"content-type", "openstack-api-version", "x-openstack-nova-api-version", "vary"}


def mv(v):
    return {"OpenStack-API-Version": "compute " + v}


def agg(name, az=None):
    a = {"name": name}
    if az is not None:
        a["availability_zone"] = az
    return json.dumps({"aggregate": a})


def act(name, body):
    return json.dumps({name: body})


SCENARIO = [
    # os-aggregates
    {"m": "GET", "p": "/os-aggregates"},
    {"m": "POST", "p": "/os-aggregates", "b": agg("agg1", "az1"), "save": {"a1": "aggregate.id"}},
    {"m": "POST", "p": "/os-aggregates", "b": agg("agg2"), "h": mv("2.41"), "save": {"a2": "aggregate.id"}},
    {"m": "POST", "p": "/os-aggregates", "b": agg("agg3", None), "h": mv("2.93"), "save": {"a3": "aggregate.id"}},
    {"m": "POST", "p": "/os-aggregates", "b": '{"aggregate": {"name": "agg4", "availability_zone": null}}', "save": {"a4": "aggregate.id"}},
    {"m": "POST", "p": "/os-aggregates", "b": agg("agg1")},
    {"m": "POST", "p": "/os-aggregates", "b": agg(" lead")},
    {"m": "POST", "p": "/os-aggregates", "b": agg("")},
    {"m": "POST", "p": "/os-aggregates", "b": agg("x" * 256)},
    {"m": "POST", "p": "/os-aggregates", "b": agg("bad", "a:b")},
    {"m": "POST", "p": "/os-aggregates", "b": agg("bad", "")},
    {"m": "POST", "p": "/os-aggregates", "b": agg("bad", " az")},
    {"m": "POST", "p": "/os-aggregates", "b": agg("bad", 5)},
    {"m": "POST", "p": "/os-aggregates", "b": '{"aggregate": {}}'},
    {"m": "POST", "p": "/os-aggregates", "b": '{"aggregate": {"name": "n", "x": 1}}'},
    {"m": "POST", "p": "/os-aggregates", "b": '{"aggr": {"name": "n"}}'},
    {"m": "POST", "p": "/os-aggregates", "b": '{"aggregate": "n"}'},
    {"m": "POST", "p": "/os-aggregates", "b": '{"aggregate": {"name": 5}}'},
    {"m": "GET", "p": "/os-aggregates/{a1}"},
    {"m": "GET", "p": "/os-aggregates/{a1}", "h": mv("2.41")},
    {"m": "GET", "p": "/os-aggregates/{a2}", "h": mv("2.93")},
    {"m": "GET", "p": "/os-aggregates/abc"},
    {"m": "GET", "p": "/os-aggregates/1.5"},
    {"m": "GET", "p": "/os-aggregates/999"},
    {"m": "GET", "p": "/os-aggregates/-1"},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("add_host", {"host": "compute-1"}), "h": mv("2.41")},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("add_host", {"host": "compute-1"})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("add_host", {"host": "nohost"})},
    {"m": "POST", "p": "/os-aggregates/999/action", "b": act("add_host", {"host": "compute-1"})},
    {"m": "POST", "p": "/os-aggregates/abc/action", "b": act("add_host", {"host": "compute-1"})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("add_host", {"host": "a/b"})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("add_host", {"host": "compute-1", "x": 1})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("add_host", {})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("nope", {})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": '{"add_host": {"host": "compute-1"}, "remove_host": {"host": "compute-1"}}'},
    {"m": "POST", "p": "/os-aggregates", "b": agg("agg5", "az2"), "save": {"a5": "aggregate.id"}},
    {"m": "POST", "p": "/os-aggregates/{a5}/action", "b": act("add_host", {"host": "compute-1"})},
    {"m": "POST", "p": "/os-aggregates/{a5}/action", "b": act("add_host", {"host": "compute-2"})},
    {"m": "POST", "p": "/os-aggregates/{a2}/action", "b": act("add_host", {"host": "compute-1"}), "h": mv("2.41")},
    {"m": "POST", "p": "/os-aggregates/{a2}/action", "b": act("add_host", {"host": "compute-2"}), "h": mv("2.41")},
    {"m": "POST", "p": "/os-aggregates/{a2}/action", "b": act("set_metadata", {"metadata": {"availability_zone": "az3"}})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("set_metadata", {"metadata": {"foo": "bar", "ram_weight_multiplier": "2"}})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("set_metadata", {"metadata": {"foo": None, "absent": None}}), "h": mv("2.41")},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("set_metadata", {"metadata": {"availability_zone": None}})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("set_metadata", {"metadata": {"availability_zone": ""}})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("set_metadata", {"metadata": {"availability_zone": "az1b"}})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("set_metadata", {"metadata": {"a/b": "1"}})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("set_metadata", {"metadata": {"k": "v" * 256}})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("set_metadata", {"metadata": {"k": 1}})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("set_metadata", {})},
    {"m": "POST", "p": "/os-aggregates/999/action", "b": act("set_metadata", {"metadata": {"k": "v"}})},
    {"m": "PUT", "p": "/os-aggregates/{a1}", "b": '{"aggregate": {"name": "agg1-renamed"}}'},
    {"m": "PUT", "p": "/os-aggregates/{a1}", "b": '{"aggregate": {"name": "agg2"}}'},
    {"m": "PUT", "p": "/os-aggregates/{a1}", "b": '{"aggregate": {"name": " spaced "}}', "h": mv("2.41")},
    {"m": "PUT", "p": "/os-aggregates/{a1}", "b": '{"aggregate": {}}'},
    {"m": "PUT", "p": "/os-aggregates/{a1}", "b": '{"aggregate": {"availability_zone": null}}'},
    {"m": "PUT", "p": "/os-aggregates/{a1}", "b": '{"aggregate": {"availability_zone": "az1c", "name": "agg1"}}', "h": mv("2.41")},
    {"m": "PUT", "p": "/os-aggregates/{a2}", "b": '{"aggregate": {"availability_zone": "az9"}}'},
    {"m": "PUT", "p": "/os-aggregates/999", "b": '{"aggregate": {"name": "n"}}'},
    {"m": "PUT", "p": "/os-aggregates/abc", "b": '{"aggregate": {"name": "n"}}'},
    {"m": "DELETE", "p": "/os-aggregates/{a1}"},
    {"m": "DELETE", "p": "/os-aggregates/abc"},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("remove_host", {"host": "compute-2"})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("remove_host", {"host": "nohost"})},
    {"m": "POST", "p": "/os-aggregates/999/action", "b": act("remove_host", {"host": "compute-1"})},
    {"m": "POST", "p": "/os-aggregates/{a1}/action", "b": act("remove_host", {"host": "compute-1"}), "h": mv("2.41")},
    {"m": "DELETE", "p": "/os-aggregates/{a1}"},
    {"m": "DELETE", "p": "/os-aggregates/{a1}"},
    {"m": "GET", "p": "/os-aggregates"},
    {"m": "GET", "p": "/os-aggregates", "h": mv("2.41")},
    {"m": "POST", "p": "/os-aggregates/{a2}/action", "b": act("remove_host", {"host": "compute-1"})},
    {"m": "POST", "p": "/os-aggregates/{a2}/action", "b": act("remove_host", {"host": "compute-2"})},
    {"m": "POST", "p": "/os-aggregates/{a5}/action", "b": act("remove_host", {"host": "compute-1"})},
    {"m": "POST", "p": "/os-aggregates/{a5}/action", "b": act("remove_host", {"host": "compute-2"})},
    {"m": "DELETE", "p": "/os-aggregates/{a2}"},
    {"m": "DELETE", "p": "/os-aggregates/{a3}"},
    {"m": "DELETE", "p": "/os-aggregates/{a4}"},
    {"m": "DELETE", "p": "/os-aggregates/{a5}"},
    {"m": "GET", "p": "/os-aggregates"},

    # os-server-groups
    {"m": "GET", "p": "/os-server-groups"},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "g1", "policies": ["anti-affinity"]}}', "save": {"g1": "server_group.id"}},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "g2", "policies": ["soft-affinity"]}}'},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "g2", "policies": ["soft-affinity"]}}', "h": mv("2.15"), "save": {"g2": "server_group.id"}},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "g3", "policy": "anti-affinity", "rules": {"max_server_per_host": 3}}}', "h": mv("2.64"), "save": {"g3": "server_group.id"}},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "g4", "policy": "affinity"}}', "h": mv("2.93"), "save": {"g4": "server_group.id"}},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "g5", "policy": "anti-affinity", "rules": {"max_server_per_host": "2"}}}', "h": mv("2.64"), "save": {"g5": "server_group.id"}},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "x", "policy": "affinity", "rules": {"max_server_per_host": 2}}}', "h": mv("2.64")},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "x", "policies": ["affinity"]}}', "h": mv("2.64")},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "x", "policy": "anti-affinity", "rules": {"max_server_per_host": 0}}}', "h": mv("2.64")},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "x", "policy": "anti-affinity", "rules": {"other": 1}}}', "h": mv("2.64")},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "x", "policy": "spread"}}', "h": mv("2.64")},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "x", "policy": "anti-affinity"}}'},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "x", "policies": ["affinity", "anti-affinity"]}}'},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "x", "policies": []}}'},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "x", "policies": "affinity"}}'},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": " x", "policies": ["affinity"]}}'},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"policies": ["affinity"]}}'},
    {"m": "POST", "p": "/os-server-groups", "b": '{"server_group": {"name": "x", "policies": ["affinity"], "metadata": {}}}'},
    {"m": "POST", "p": "/os-server-groups", "b": '{"group": {}}'},
    {"m": "GET", "p": "/os-server-groups/{g1}"},
    {"m": "GET", "p": "/os-server-groups/{g1}", "h": mv("2.13")},
    {"m": "GET", "p": "/os-server-groups/{g3}", "h": mv("2.63")},
    {"m": "GET", "p": "/os-server-groups/{g3}", "h": mv("2.64")},
    {"m": "GET", "p": "/os-server-groups/{g5}", "h": mv("2.93")},
    {"m": "GET", "p": "/os-server-groups/{g1}", "h": mv("2.93")},
    {"m": "GET", "p": "/os-server-groups/6b1a3e1e-0000-4000-8000-000000000000"},
    {"m": "GET", "p": "/os-server-groups/nope"},
    {"m": "GET", "p": "/os-server-groups", "h": mv("2.13")},
    {"m": "GET", "p": "/os-server-groups", "h": mv("2.64")},
    {"m": "GET", "p": "/os-server-groups?all_projects", "h": mv("2.64")},
    {"m": "GET", "p": "/os-server-groups?all_projects=False", "h": mv("2.64")},
    {"m": "GET", "p": "/os-server-groups?limit=2&offset=1", "h": mv("2.64")},
    {"m": "GET", "p": "/os-server-groups?limit=-1"},
    {"m": "GET", "p": "/os-server-groups?offset=x"},
    {"m": "GET", "p": "/os-server-groups?colour=red", "h": mv("2.74")},
    {"m": "GET", "p": "/os-server-groups?colour=red", "h": mv("2.75")},

    # limits, while project admin has five server groups
    {"m": "GET", "p": "/limits"},
    {"m": "GET", "p": "/limits", "h": mv("2.35")},
    {"m": "GET", "p": "/limits", "h": mv("2.36")},
    {"m": "GET", "p": "/limits", "h": mv("2.39")},
    {"m": "GET", "p": "/limits", "h": mv("2.57")},
    {"m": "GET", "p": "/limits", "h": mv("2.93")},
    {"m": "GET", "p": "/limits?colour=red", "h": mv("2.74")},
    {"m": "GET", "p": "/limits?colour=red", "h": mv("2.75")},

    {"m": "DELETE", "p": "/os-server-groups/{g1}"},
    {"m": "DELETE", "p": "/os-server-groups/{g1}"},
    {"m": "DELETE", "p": "/os-server-groups/{g2}", "h": mv("2.93")},
    {"m": "DELETE", "p": "/os-server-groups/{g3}"},
    {"m": "DELETE", "p": "/os-server-groups/{g4}"},
    {"m": "DELETE", "p": "/os-server-groups/{g5}"},
    {"m": "GET", "p": "/os-server-groups"},
    {"m": "GET", "p": "/limits", "h": mv("2.93")},
]


def fill(text, saved):
    for k, v in saved.items():
        text = text.replace("{" + k + "}", str(v))
    return text


def dig(doc, path):
    for part in path.split("."):
        doc = doc[part]
    return doc


def main():
    saved = {}
    out = []
    for st in SCENARIO:
        headers = {"X-Auth-Token": "admin"}
        headers.update(st.get("h", {}))
        body = st.get("b")
        data = None
        if body is not None:
            data = fill(body, saved).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(BASE + fill(st["p"], saved), data=data, method=st["m"], headers=headers)
        try:
            resp = urllib.request.urlopen(req)
        except urllib.error.HTTPError as e:
            resp = e
        raw = resp.read().decode()
        for name, path in st.get("save", {}).items():
            saved[name] = dig(json.loads(raw), path)
        out.append({
            "method": st["m"], "path": st["p"], "body": body, "headers": st.get("h", {}),
            "save": st.get("save", {}),
            "status": resp.status,
            "response_headers": [[k, v] for k, v in resp.headers.items() if k.lower() in KEEP],
            "response_body": raw,
        })
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


main()
