"""Records the real Nova 26's answers for the cold moves: resize,
confirmResize, revertResize, migrate, os-migrations and a server's
migrations and instance actions.

Start the reference (../../../shared/reference/nova/README.md) first:
    start-nova.sh STATE --computes 3 --base-port 21000
then run
    /usr/bin/python3 nova_moves.py http://127.0.0.1:21004 > nova_moves.json
    stop-nova.sh STATE
It creates Berth's m1.tiny (id 1) and m1.small (id 2), boots "mover"
from the stand-in Glance's cirros image with no networks, waits for
ACTIVE, then walks the moves, recording each request as the admin of
project "admin" (status and body): the refusals of a server in the
wrong state, a resize to m1.small until VERIFY_RESIZE, os-migrations at
each microversion that changed it, confirm, a cold migration and its
revert. TestMovesMatchNova compares Berth's answers with these.
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


def wait(sid, want):
    for _ in range(180):
        status, shown = call("GET", "/servers/" + sid, version="2.93")
        if shown["server"]["status"] == want:
            return shown
        if shown["server"]["status"] == "ERROR":
            break
        time.sleep(1)
    raise SystemExit("server %s never %s: %s" % (sid, want, shown))


for fid, name, ram, disk in (("1", "m1.tiny", 512, 1), ("2", "m1.small", 2048, 20)):
    status, _ = call("POST", "/flavors", {"flavor": {"name": name, "id": fid, "ram": ram, "vcpus": 1, "disk": disk}})
    assert status in (200, 409), status
status, created = call("POST", "/servers", {"server": {"name": "mover", "flavorRef": "1", "imageRef": IMAGE,
                                                        "networks": "none"}}, "2.93")
assert status == 202, (status, created)
sid = created["server"]["id"]
shown = wait(sid, "ACTIVE")
source = shown["server"]["OS-EXT-SRV-ATTR:host"]

ACTION = "/servers/" + sid + "/action"
records = []


def record(method, path, body=None, version="2.1", label=""):
    status, answer = call(method, path, body, version)
    records.append({"label": label, "method": method, "path": path.replace(sid, "{server}"), "body": body,
                    "version": version, "status": status, "answer": answer})
    return status, answer


# Refusals of an ACTIVE server.
record("POST", ACTION, {"confirmResize": None}, label="confirm while active")
record("POST", ACTION, {"revertResize": None}, label="revert while active")
record("POST", ACTION, {"resize": {"flavorRef": "1"}}, label="resize to its own flavor")
record("POST", ACTION, {"resize": {"flavorRef": "404"}}, label="resize to an unknown flavor")
record("POST", ACTION, {"resize": {}}, label="resize without flavorRef")
record("POST", ACTION, {"resize": {"flavorRef": ""}}, label="resize with an empty flavorRef")
record("POST", ACTION, {"resize": {"flavorRef": "2", "extra": 1}}, label="resize with an extra member")
record("POST", ACTION, {"migrate": {"host": source}}, version="2.56", label="migrate to its own host")
record("POST", ACTION, {"migrate": {"host": "no-such-host"}}, version="2.56", label="migrate to an unknown host")
record("POST", ACTION, {"migrate": {"host": "bad host!"}}, version="2.56", label="migrate to a host name that is no fqdn")
record("POST", ACTION, {"migrate": {"nohost": 1}}, version="2.56", label="migrate with an extra member")
record("POST", ACTION, {"nosuchaction": None}, label="unknown action")
record("GET", "/os-migrations", label="no migrations yet")

# Resize to m1.small: VERIFY_RESIZE, then the views.
record("POST", ACTION, {"resize": {"flavorRef": "2"}}, label="resize")
shown = wait(sid, "VERIFY_RESIZE")
records.append({"label": "server while VERIFY_RESIZE", "server": shown["server"]})
record("POST", ACTION, {"resize": {"flavorRef": "1"}}, label="resize while VERIFY_RESIZE")
record("POST", ACTION, {"migrate": None}, label="migrate while VERIFY_RESIZE")
for v in ("2.1", "2.23", "2.59", "2.80"):
    record("GET", "/os-migrations", version=v, label="migrations while VERIFY_RESIZE at " + v)
record("GET", "/servers/" + sid + "/migrations", version="2.23", label="server migrations while VERIFY_RESIZE")
record("GET", "/servers/" + sid + "/migrations", version="2.22", label="server migrations before 2.23")
record("GET", "/servers/" + sid + "/os-instance-actions", version="2.84", label="actions while VERIFY_RESIZE")
record("POST", ACTION, {"confirmResize": None}, label="confirm")
wait(sid, "ACTIVE")
record("POST", ACTION, {"confirmResize": None}, label="confirm again")

# Cold migration, reverted.
record("POST", ACTION, {"migrate": None}, label="migrate")
wait(sid, "VERIFY_RESIZE")
record("POST", ACTION, {"revertResize": None}, label="revert")
wait(sid, "ACTIVE")
for q in ("", "?status=reverted", "?migration_type=resize", "?instance_uuid=" + sid, "?source_compute=" + source,
          "?hidden=0", "?limit=1", "?changes-since=2000-01-01T00:00:00Z", "?bogus=1"):
    record("GET", "/os-migrations" + q, version="2.80", label="migrations after revert " + q)
record("GET", "/servers/" + sid + "/os-instance-actions", version="2.84", label="actions after revert")
status, acts = call("GET", "/servers/" + sid + "/os-instance-actions", version="2.84")
for a in acts["instanceActions"]:
    record("GET", "/servers/" + sid + "/os-instance-actions/" + a["request_id"], version="2.84",
           label="action " + a["action"])
json.dump({"server": sid, "source": source, "records": records}, sys.stdout, indent=1)
