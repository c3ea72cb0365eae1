"""Records Nova 26's os-services, os-hypervisors and os-availability-zone.

Run against the reference Nova with two fake compute hosts (see
/work/shared/reference/nova/README.md):
    start-nova.sh /tmp/ref-nova-svc --computes 2 --base-port 18800
    /usr/bin/python3 nova_hosts.py http://127.0.0.1:18804/v2.1 > nova_hosts.json
    stop-nova.sh /tmp/ref-nova-svc
It sends each request of the scenario in order as the admin, and records
the status, body and the type and version headers. Ids differ by nature:
"ids" maps placeholder names to Nova's ids, and paths and bodies name
them as {placeholder}; TestHostsMatchNova replays the scenario against
Berth with its own ids under the same names and compares the answers
with ids, timestamps and driver facts normalised.
"""
import json
import sys
import time
import urllib.error
import urllib.request

BASE = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:18804/v2.1"
KEEP = ("Content-Type", "OpenStack-API-Version", "X-OpenStack-Nova-API-Version", "Vary")


def call(method, path, body=None, version=None):
    req = urllib.request.Request(BASE + path, method=method, data=body.encode() if body is not None else None)
    req.add_header("X-Auth-Token", "admin")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if version:
        req.add_header("OpenStack-API-Version", "compute " + version)
    try:
        resp = urllib.request.urlopen(req, timeout=60)
    except urllib.error.HTTPError as e:
        resp = e
    data = resp.read().decode()
    return resp.status, [[k, v] for k, v in resp.headers.items() if k in KEEP], data


def js(path, version="2.53"):
    return json.loads(call("GET", path, version=version)[2])


# Wait for every service's first state report (updated_at null before).
for _ in range(120):
    svcs = js("/os-services")["services"]
    if len(svcs) == 4 and all(s["updated_at"] for s in svcs):
        break
    time.sleep(1)
else:
    sys.exit("services never reported: %s" % svcs)

ids = {}
for s in js("/os-services")["services"]:
    if s["binary"] == "nova-compute":
        ids[s["host"].replace("compute-", "c") + "_uuid"] = s["id"]
for s in js("/os-services", "2.1")["services"]:
    if s["binary"] == "nova-compute":
        ids[s["host"].replace("compute-", "c") + "_id"] = s["id"]
for h in js("/os-hypervisors")["hypervisors"]:
    ids[h["hypervisor_hostname"].replace("compute-", "hv") + "_uuid"] = h["id"]
for h in js("/os-hypervisors", "2.1")["hypervisors"]:
    ids[h["hypervisor_hostname"].replace("compute-", "hv") + "_id"] = h["id"]

UNKNOWN = "3b0d5c1e-8f6a-4d2b-9c7e-1a2b3c4d5e6f"
VERSIONS = ["2.1", "2.11", "2.52", "2.53", "2.87", "2.88", "2.93"]
answers = []


def rec(name, method, path, body=None, version=None):
    status, headers, data = call(method, path.format(**ids, unknown=UNKNOWN) if "{" in path else path,
                                 body.format(**ids) if body and "{c" in body else body, version)
    answers.append({"name": name, "method": method, "path": path, "body": body, "version": version,
                    "status": status, "response_headers": headers, "response": data})
    return data


def reads(tag):
    for v in VERSIONS:
        rec(tag + " services " + v, "GET", "/os-services", version=v)
        rec(tag + " hypervisors " + v, "GET", "/os-hypervisors", version=v)
        rec(tag + " hypervisors detail " + v, "GET", "/os-hypervisors/detail", version=v)
        rec(tag + " az " + v, "GET", "/os-availability-zone", version=v)
        rec(tag + " az detail " + v, "GET", "/os-availability-zone/detail", version=v)
        rec(tag + " statistics " + v, "GET", "/os-hypervisors/statistics", version=v)
        hv = "{hv1_uuid}" if v >= "2.53" and v != "2.1" and v != "2.11" else "{hv1_id}"
        rec(tag + " hypervisor show " + v, "GET", "/os-hypervisors/" + hv, version=v)


# Python's string order would put "2.1" < "2.11" < "2.52" < "2.53": good
# enough for the choice of id form above.
reads("fresh")
rec("services host filter", "GET", "/os-services?host=compute-1")
rec("services binary filter", "GET", "/os-services?binary=nova-scheduler")
rec("services both filters", "GET", "/os-services?host=compute-2&binary=nova-compute", version="2.11")
rec("services unknown host", "GET", "/os-services?host=nope")
rec("services unknown filter 2.74", "GET", "/os-services?colour=red", version="2.74")
rec("services unknown filter 2.75", "GET", "/os-services?colour=red", version="2.75")
rec("hypervisors pattern 2.53", "GET", "/os-hypervisors?hypervisor_hostname_pattern=compute-1", version="2.53")
rec("hypervisors pattern none 2.53", "GET", "/os-hypervisors?hypervisor_hostname_pattern=nope", version="2.53")
rec("hypervisors pattern with limit", "GET", "/os-hypervisors?hypervisor_hostname_pattern=compute&limit=1", version="2.53")
rec("hypervisors unknown query 2.53", "GET", "/os-hypervisors?colour=red", version="2.53")
rec("hypervisors limit 2.33", "GET", "/os-hypervisors?limit=1", version="2.33")
rec("hypervisors detail limit 2.53", "GET", "/os-hypervisors/detail?limit=1", version="2.53")
rec("hypervisors bad marker", "GET", "/os-hypervisors?marker=nope", version="2.53")
rec("hypervisors bad with_servers", "GET", "/os-hypervisors?with_servers=maybe", version="2.53")
rec("hypervisor show not int", "GET", "/os-hypervisors/abc", version="2.1")
rec("hypervisor show unknown int", "GET", "/os-hypervisors/9999", version="2.1")
rec("hypervisor show not uuid 2.53", "GET", "/os-hypervisors/abc", version="2.53")
rec("hypervisor show unknown uuid", "GET", "/os-hypervisors/{unknown}", version="2.53")
rec("hypervisor cpu_info 2.27", "GET", "/os-hypervisors/{hv1_id}", version="2.27")
rec("hypervisor cpu_info 2.28", "GET", "/os-hypervisors/{hv1_id}", version="2.28")
rec("hypervisor uptime 2.1", "GET", "/os-hypervisors/{hv1_id}/uptime", version="2.1")
rec("hypervisor uptime 2.88", "GET", "/os-hypervisors/{hv1_uuid}/uptime", version="2.88")
rec("hypervisor search", "GET", "/os-hypervisors/compute/search", version="2.1")
rec("hypervisor search none", "GET", "/os-hypervisors/nope/search", version="2.1")
rec("hypervisor search 2.53", "GET", "/os-hypervisors/compute/search", version="2.53")
rec("hypervisor servers empty", "GET", "/os-hypervisors/compute-2/servers", version="2.1")

# A server on compute-1 (2.74: host asked for; networks none).
rec("flavor for the server", "POST", "/flavors",
    '{"flavor": {"name": "hosts.tiny", "ram": 128, "vcpus": 1, "disk": 1, "id": "ht1"}}')
status, _, data = call("POST", "/servers", json.dumps({"server": {
    "name": "srv1", "flavorRef": "ht1", "imageRef": "9a8d6b8e-3c5e-4b0a-9d34-2f4e5b6c7d80",
    "networks": "none", "host": "compute-1"}}), "2.74")
assert status == 202, data
ids["srv1_uuid"] = json.loads(data)["server"]["id"]
for _ in range(120):
    if js("/servers/" + ids["srv1_uuid"])["server"]["status"] == "ACTIVE":
        break
    time.sleep(1)
else:
    sys.exit("server never went ACTIVE")

rec("with server statistics", "GET", "/os-hypervisors/statistics", version="2.1")
rec("with server detail 2.1", "GET", "/os-hypervisors/detail", version="2.1")
rec("with server servers 2.1", "GET", "/os-hypervisors/compute/servers", version="2.1")
rec("with server show with_servers 2.53", "GET", "/os-hypervisors/{hv1_uuid}?with_servers=true", version="2.53")
rec("with server list with_servers 2.75", "GET", "/os-hypervisors?with_servers=1", version="2.75")
rec("with server show with_servers false 2.75", "GET", "/os-hypervisors/{hv2_uuid}?with_servers=true", version="2.75")

# The old actions (before 2.53).
rec("disable", "PUT", "/os-services/disable", '{"host": "compute-1", "binary": "nova-compute"}', "2.1")
rec("disable-log-reason", "PUT", "/os-services/disable-log-reason",
    '{"host": "compute-1", "binary": "nova-compute", "disabled_reason": "maint <x>"}', "2.1")
rec("after disable-log-reason", "GET", "/os-services?host=compute-1", version="2.1")
rec("disable-log-reason no reason", "PUT", "/os-services/disable-log-reason",
    '{"host": "compute-1", "binary": "nova-compute"}', "2.1")
rec("enable", "PUT", "/os-services/enable", '{"host": "compute-1", "binary": "nova-compute"}', "2.1")
rec("force-down 2.1", "PUT", "/os-services/force-down",
    '{"host": "compute-1", "binary": "nova-compute", "forced_down": true}', "2.1")
rec("force-down 2.11", "PUT", "/os-services/force-down",
    '{"host": "compute-1", "binary": "nova-compute", "forced_down": true}', "2.11")
rec("after force-down", "GET", "/os-services?host=compute-1", version="2.11")
rec("force-down string", "PUT", "/os-services/force-down",
    '{"host": "compute-1", "binary": "nova-compute", "forced_down": "no"}', "2.11")
rec("force-down missing", "PUT", "/os-services/force-down", '{"host": "compute-1", "binary": "nova-compute"}', "2.11")
rec("unknown action", "PUT", "/os-services/reboot", '{"host": "compute-1", "binary": "nova-compute"}', "2.1")
rec("disable unknown host", "PUT", "/os-services/disable", '{"host": "nope", "binary": "nova-compute"}', "2.1")
rec("disable scheduler", "PUT", "/os-services/disable", '{"host": "controller", "binary": "nova-scheduler"}', "2.1")
rec("disable missing binary", "PUT", "/os-services/disable", '{"host": "compute-1"}', "2.1")
rec("disable extra field", "PUT", "/os-services/disable", '{"host": "compute-1", "binary": "nova-compute", "x": 1}', "2.1")
rec("disable bad host", "PUT", "/os-services/disable", '{"host": "a b", "binary": "nova-compute"}', "2.1")
rec("disable forced_down 2.1", "PUT", "/os-services/disable",
    '{"host": "compute-1", "binary": "nova-compute", "forced_down": true}', "2.1")
rec("old action at 2.53", "PUT", "/os-services/disable", '{"host": "compute-1", "binary": "nova-compute"}', "2.53")
rec("old action at 2.53 empty body", "PUT", "/os-services/disable", '{}', "2.53")

# The 2.53 form.
rec("2.53 disable", "PUT", "/os-services/{c1_uuid}", '{"status": "disabled", "disabled_reason": "r1"}', "2.53")
rec("2.53 up", "PUT", "/os-services/{c1_uuid}", '{"forced_down": false}', "2.53")
rec("2.53 enable with reason", "PUT", "/os-services/{c1_uuid}", '{"status": "enabled", "disabled_reason": "x"}', "2.53")
rec("2.53 nothing", "PUT", "/os-services/{c1_uuid}", '{}', "2.53")
rec("2.53 same again", "PUT", "/os-services/{c1_uuid}", '{"status": "disabled", "disabled_reason": "r1"}', "2.53")
rec("2.53 bad status", "PUT", "/os-services/{c1_uuid}", '{"status": "off"}', "2.53")
rec("2.53 reason too long", "PUT", "/os-services/{c1_uuid}", '{"status": "disabled", "disabled_reason": "' + "x" * 256 + '"}', "2.53")
rec("2.53 not uuid", "PUT", "/os-services/123", '{"status": "enabled"}', "2.53")
rec("2.53 unknown", "PUT", "/os-services/{unknown}", '{"status": "enabled"}', "2.53")
rec("2.53 force down", "PUT", "/os-services/{c2_uuid}", '{"forced_down": true}', "2.53")
rec("2.53 disable c2", "PUT", "/os-services/{c2_uuid}", '{"status": "disabled"}', "2.53")
reads("all disabled")
rec("2.53 enable c1", "PUT", "/os-services/{c1_uuid}", '{"status": "enabled"}', "2.88")
rec("2.53 enable c2 and up", "PUT", "/os-services/{c2_uuid}", '{"status": "enabled", "forced_down": false}', "2.93")
rec("2.53 put bad forced_down", "PUT", "/os-services/{c2_uuid}", '{"forced_down": "maybe"}', "2.53")

# Delete.
rec("delete not int", "DELETE", "/os-services/abc", version="2.1")
rec("delete unknown int", "DELETE", "/os-services/9999", version="2.52")
rec("delete not uuid", "DELETE", "/os-services/123", version="2.53")
rec("delete unknown uuid", "DELETE", "/os-services/{unknown}", version="2.53")
rec("delete with instance", "DELETE", "/os-services/{c1_uuid}", version="2.53")
rec("delete with instance 2.1", "DELETE", "/os-services/{c1_id}", version="2.1")
rec("delete compute-2", "DELETE", "/os-services/{c2_uuid}", version="2.53")
rec("delete compute-2 again", "DELETE", "/os-services/{c2_uuid}", version="2.53")
rec("after delete services", "GET", "/os-services?binary=nova-compute", version="2.53")
rec("after delete hypervisors", "GET", "/os-hypervisors", version="2.53")

json.dump({"ids": ids, "unknown": UNKNOWN, "answers": answers}, sys.stdout, indent=1, ensure_ascii=False)
print()
