"""Records the real Nova 26's answers for the servers resource.

Start the reference (../../../shared/reference/nova/README.md) first:
    start-nova.sh STATE --computes 2 --base-port 18700
then run
    /usr/bin/python3 nova_servers.py http://127.0.0.1:18704 > nova_servers.json
    stop-nova.sh STATE
It creates Berth's m1.tiny (id 1), boots one server "web-1" from the
stand-in Glance's cirros image with no networks, waits for ACTIVE, boots
"huge-1" of a flavor no host fits, waits for its ERROR, and
records each request of SCENARIO as the admin of project "admin":
status and body. TestServersMatchNova replays the scenario against
Berth's API with a server in the same state and compares the bodies
with the ids, times and host names Berth cannot share normalised.
"""
import json
import sys
import time
import urllib.error
import urllib.request

BASE = sys.argv[1].rstrip("/") + "/v2.1"
IMAGE = "9a8d6b8e-3c5e-4b0a-9d34-2f4e5b6c7d80"
MISSING = "00000000-0000-4000-8000-000000000000"


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
        with urllib.request.urlopen(req, data) as r:
            raw = r.read()
            return r.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, raw.decode()


status, _ = call("POST", "/flavors", {"flavor": {"name": "m1.tiny", "id": "1", "ram": 512, "vcpus": 1, "disk": 1}})
assert status in (200, 409), status
status, created = call("POST", "/servers", {"server": {"name": "web-1", "flavorRef": "1", "imageRef": IMAGE,
                                                        "networks": "none"}}, "2.93")
assert status == 202, (status, created)
sid = created["server"]["id"]
for _ in range(120):
    status, shown = call("GET", "/servers/" + sid)
    if shown["server"]["status"] in ("ACTIVE", "ERROR"):
        break
    time.sleep(1)
assert shown["server"]["status"] == "ACTIVE", shown

# A server no host can take: ERROR in cell0, with its fault.
status, _ = call("POST", "/flavors", {"flavor": {"name": "huge", "id": "99", "ram": 512, "vcpus": 1, "disk": 700000}})
assert status in (200, 409), status
status, big = call("POST", "/servers", {"server": {"name": "huge-1", "flavorRef": "99", "imageRef": IMAGE,
                                                   "networks": "none"}}, "2.93")
assert status == 202, (status, big)
bid = big["server"]["id"]
for _ in range(120):
    status, shown = call("GET", "/servers/" + bid)
    if shown["server"]["status"] in ("ACTIVE", "ERROR"):
        break
    time.sleep(1)
assert shown["server"]["status"] == "ERROR", shown

SERVER = "/servers/" + sid
ERRORED = "/servers/" + bid
SCENARIO = [
    ("GET", SERVER, None, "2.1"),
    ("GET", SERVER, None, "2.47"),
    ("GET", SERVER, None, "2.73"),
    ("GET", SERVER, None, "2.93"),
    ("GET", "/servers", None, "2.1"),
    ("GET", "/servers/detail", None, "2.1"),
    ("GET", "/servers/detail", None, "2.47"),
    ("GET", "/servers/detail", None, "2.73"),
    ("GET", "/servers/detail", None, "2.93"),
    ("GET", "/servers?status=ERROR", None, "2.93"),
    ("GET", "/servers?status=active", None, "2.93"),
    ("GET", "/servers?status=SHUTOFF", None, "2.93"),
    ("GET", "/servers?status=NOPE", None, "2.37"),
    ("GET", "/servers?status=NOPE", None, "2.38"),
    ("GET", "/servers?name=^WEB", None, "2.1"),
    ("GET", "/servers?name=nomatch", None, "2.1"),
    ("GET", "/servers?flavor=1", None, "2.1"),
    ("GET", "/servers?flavor=42", None, "2.1"),
    ("GET", "/servers?availability_zone=nova", None, "2.1"),
    ("GET", "/servers?changes-since=2000-01-01T00:00:00Z", None, "2.1"),
    ("GET", "/servers?changes-before=2000-01-01T00:00:00Z", None, "2.66"),
    ("GET", "/servers?changes-since=2001-01-01&changes-before=2000-01-01", None, "2.66"),
    ("GET", "/servers?changes-since=yesterday", None, "2.1"),
    ("GET", "/servers?limit=1", None, "2.1"),
    ("GET", "/servers?marker=" + MISSING, None, "2.1"),
    ("GET", "/servers?foo=bar", None, "2.74"),
    ("GET", "/servers?foo=bar", None, "2.75"),
    ("GET", "/servers?metadata=x", None, "2.1"),
    ("GET", "/servers?all_tenants=maybe", None, "2.1"),
    ("GET", "/servers?sort_key=display_name&sort_dir=up", None, "2.1"),
    ("GET", "/servers/" + MISSING, None, "2.1"),
    ("DELETE", "/servers/" + MISSING, None, "2.1"),
    ("POST", "/servers", {"server": {"name": "x", "flavorRef": "1"}}, "2.1"),
    ("POST", "/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": MISSING}}, "2.1"),
    ("POST", "/servers", {"server": {"name": "x", "flavorRef": "42", "imageRef": IMAGE}}, "2.1"),
    ("POST", "/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": IMAGE, "min_count": 3,
                                     "max_count": 2}}, "2.1"),
    ("POST", "/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": IMAGE}}, "2.37"),
    ("POST", "/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": IMAGE, "networks": "none"},
                          "os:scheduler_hints": {"group": MISSING}}, "2.37"),
    ("POST", "/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": IMAGE, "networks": "none",
                                     "availability_zone": "moon"}}, "2.37"),
    ("POST", "/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": IMAGE, "networks": "none",
                                     "key_name": "nokey"}}, "2.37"),
    ("POST", "/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": IMAGE, "networks": "none",
                                     "host": "compute-9"}}, "2.74"),
    ("POST", "/servers", {"server": {"name": "x", "flavorRef": "1", "imageRef": IMAGE, "networks": "none",
                                     "availability_zone": "a:b:c:d"}}, "2.37"),
    ("GET", ERRORED, None, "2.1"),
    ("GET", ERRORED, None, "2.93"),
    ("GET", "/servers?status=ERROR", None, "2.93"),
    ("DELETE", ERRORED, None, "2.1"),
    ("DELETE", SERVER, None, "2.1"),
]

out = {"server": sid, "errored": bid, "created": created, "answers": []}
for method, path, body, version in SCENARIO:
    status, answer = call(method, path, body, version)
    out["answers"].append({"method": method, "path": path.replace(sid, "{server}").replace(bid, "{errored}"), "body": body,
                           "version": version, "status": status, "answer": answer})
json.dump(out, sys.stdout, indent=1, sort_keys=False)
sys.stdout.write("\n")
