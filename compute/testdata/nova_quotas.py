"""Records the real Nova 26's answers for os-quota-sets, limits and the
quota refusals of server and server group creates.

Start the reference (../../../shared/reference/nova/README.md) first:
    start-nova.sh STATE --base-port 20000
then run
    /usr/bin/python3 nova_quotas.py http://127.0.0.1:20004 > nova_quotas.json
    stop-nova.sh STATE
It creates flavor "q.small" (id "q1": 2 VCPU, 512 MB) and records each
request of the scenario in order as the admin of project "admin" (the
quota set of project "other" is only read and set, never used): status
and body. Servers it boots are waited ACTIVE before the next request,
since Nova counts cores and RAM from Placement, which knows a server
only once it is scheduled. TestQuotasMatchNova replays the scenario
against Berth with the server ids normalised.
"""
import json
import sys
import time
import urllib.error
import urllib.request

BASE = sys.argv[1].rstrip("/") + "/v2.1"
IMAGE = "9a8d6b8e-3c5e-4b0a-9d34-2f4e5b6c7d80"


def call(method, path, body=None, version=None):
    req = urllib.request.Request(BASE + path, method=method)
    req.add_header("X-Auth-Token", "admin")
    if version:
        req.add_header("OpenStack-API-Version", "compute " + version)
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        req.add_header("Content-Type", "application/json")
    try:
        resp = urllib.request.urlopen(req, data, timeout=60)
    except urllib.error.HTTPError as e:
        resp = e
    text = resp.read().decode()
    return resp.status, text


answers = []


def rec(name, method, path, body=None, version=None):
    status, text = call(method, path, body, version)
    answers.append({"name": name, "method": method, "path": path, "body": body, "version": version,
                    "status": status, "response": text})
    return status, text


def wait_active(sid):
    for _ in range(120):
        _, text = call("GET", "/servers/" + sid)
        st = json.loads(text)["server"]["status"]
        if st in ("ACTIVE", "ERROR"):
            return st
        time.sleep(0.5)
    sys.exit("server %s never left BUILD" % sid)


def boot(name, body_extra=None, version="2.37"):
    server = {"name": name, "flavorRef": "q1", "imageRef": IMAGE}
    if version >= "2.37":
        server["networks"] = "none"
    server.update(body_extra or {})
    status, text = rec("boot " + name, "POST", "/servers", {"server": server}, version)
    if status == 202:
        wait_active(json.loads(text)["server"]["id"])
    return status


call("POST", "/flavors", {"flavor": {"name": "q.small", "id": "q1", "ram": 512, "vcpus": 2, "disk": 1}})

for v in ["2.1", "2.35", "2.36", "2.56", "2.57", "2.75"]:
    rec("defaults " + v, "GET", "/os-quota-sets/other/defaults", version=v)
    rec("show " + v, "GET", "/os-quota-sets/other", version=v)
    rec("detail " + v, "GET", "/os-quota-sets/other/detail", version=v)
rec("show extra query 2.74", "GET", "/os-quota-sets/other?foo=bar", version="2.74")
rec("show extra query 2.75", "GET", "/os-quota-sets/other?foo=bar", version="2.75")
rec("show user 2.57", "GET", "/os-quota-sets/other?user_id=u1", version="2.57")

for v, body in [
    ("2.1", {"quota_set": {"instances": 50, "floating_ips": 7}}),
    ("2.36", {"quota_set": {"floating_ips": 7}}),
    ("2.57", {"quota_set": {"injected_files": 7}}),
    ("2.56", {"quota_set": {"injected_files": 6, "metadata_items": "64"}}),
    ("2.57", {"quota_set": {"instances": 20, "cores": 40, "ram": -1, "key_pairs": 3}}),
    ("2.1", {"quota_set": {"networks": 3}}),
    ("2.57", {"quota_set": {"instances": -2}}),
    ("2.57", {"quota_set": {"instances": "x"}}),
    ("2.57", {"quota_set": {"bogus": 1}}),
    ("2.57", {"quota_set": {"instances": 2147483648}}),
    ("2.57", {"quota": {"instances": 1}}),
    ("2.57", {"quota_set": {"instances": 5, "force": "maybe"}}),
    ("2.57", {"quota_set": {"instances": None}}),
]:
    rec("update %s %s" % (v, json.dumps(body)), "PUT", "/os-quota-sets/other", body, v)
rec("show after updates", "GET", "/os-quota-sets/other", version="2.57")
rec("update user 2.57", "PUT", "/os-quota-sets/other?user_id=u1", {"quota_set": {"instances": 4}}, "2.57")
rec("update user over project", "PUT", "/os-quota-sets/other?user_id=u1", {"quota_set": {"instances": 30}}, "2.57")
rec("show user after", "GET", "/os-quota-sets/other?user_id=u1", version="2.57")
rec("detail user after", "GET", "/os-quota-sets/other/detail?user_id=u1", version="2.57")
rec("show project after user", "GET", "/os-quota-sets/other", version="2.57")
rec("delete user", "DELETE", "/os-quota-sets/other?user_id=u1", version="2.57")
rec("show user after delete", "GET", "/os-quota-sets/other?user_id=u1", version="2.57")
rec("delete", "DELETE", "/os-quota-sets/other", version="2.57")
rec("show after delete", "GET", "/os-quota-sets/other", version="2.57")

# Usage in project "admin": two servers of 2 VCPU under 3 instances and 5 cores.
rec("set admin", "PUT", "/os-quota-sets/admin", {"quota_set": {"instances": 3, "cores": 5, "ram": 4096}}, "2.57")
boot("q-1")
boot("q-2")
rec("detail admin used", "GET", "/os-quota-sets/admin/detail", version="2.57")
rec("detail admin used 2.1", "GET", "/os-quota-sets/admin/detail", version="2.1")
for v in ["2.1", "2.36", "2.39", "2.57"]:
    rec("limits " + v, "GET", "/limits", version=v)
rec("limits other project", "GET", "/limits?tenant_id=other", version="2.57")
boot("q-over-cores")
boot("q-over-count", {"min_count": 2, "max_count": 3}, version="2.37")
rec("set ram low", "PUT", "/os-quota-sets/admin", {"quota_set": {"ram": 1024, "force": True}}, "2.57")
boot("q-over-cores-ram")
rec("set below usage", "PUT", "/os-quota-sets/admin", {"quota_set": {"instances": 1, "cores": 3}}, "2.57")
rec("set below usage forced", "PUT", "/os-quota-sets/admin", {"quota_set": {"instances": 1, "force": "true"}}, "2.57")
rec("set cores unlimited", "PUT", "/os-quota-sets/admin", {"quota_set": {"cores": -1, "ram": -1}}, "2.57")
boot("q-over-instances")
rec("limits over", "GET", "/limits", version="2.57")
rec("set instances 4", "PUT", "/os-quota-sets/admin", {"quota_set": {"instances": 4}}, "2.57")
boot("q-range", {"min_count": 1, "max_count": 5}, version="2.37")
rec("detail after range", "GET", "/os-quota-sets/admin/detail", version="2.57")

# Server groups and their members.
rec("set groups", "PUT", "/os-quota-sets/admin",
    {"quota_set": {"server_groups": 1, "server_group_members": 1, "instances": 10}}, "2.57")
status, text = rec("group 1", "POST", "/os-server-groups", {"server_group": {"name": "g1", "policy": "affinity"}},
                   "2.64")
group = json.loads(text)["server_group"]["id"]
rec("group 2", "POST", "/os-server-groups", {"server_group": {"name": "g2", "policy": "affinity"}}, "2.64")
rec("detail groups", "GET", "/os-quota-sets/admin/detail", version="2.57")
call("PUT", "/os-quota-sets/admin", {"quota_set": {"server_groups": 1}}, "2.57")
boot("q-member-1", {"networks": "none"}, "2.37")  # not in the group
answers[-1]["name"] = "boot q-member-1 (no group)"
status, text = rec("boot in group 1", "POST", "/servers",
                   {"server": {"name": "m1", "flavorRef": "q1", "imageRef": IMAGE, "networks": "none"},
                    "os:scheduler_hints": {"group": group}}, "2.37")
if status == 202:
    wait_active(json.loads(text)["server"]["id"])
rec("boot in group 2", "POST", "/servers",
    {"server": {"name": "m2", "flavorRef": "q1", "imageRef": IMAGE, "networks": "none"},
     "os:scheduler_hints": {"group": group}}, "2.37")
rec("limits groups", "GET", "/limits", version="2.57")

json.dump({"group": group, "answers": answers}, sys.stdout, indent=1)
