"""Records the real Nova 26's answers for the moves that keep or rebuild
a server elsewhere: os-migrateLive, a server's in-progress migrations
(show, abort, force_complete), evacuate, shelve / shelveOffload /
unshelve, and os-migrations filtered after them.

Start the reference (../../../shared/reference/nova/README.md) with the
fake driver whose live migrations wait for force_complete or abort
(about 5 s, then they complete by themselves):
    start-nova.sh STATE --computes 3 --base-port 19000 --driver fake.FakeLiveMigrateDriver
then run
    /usr/bin/python3 nova_live.py http://127.0.0.1:19004 STATE > nova_live.json
    stop-nova.sh STATE
STATE is needed for the evacuation: the script stops the nova-compute
of the evacuated server's host (its pid from STATE/pids) and forces the
service down (2.53), as an operator would. Each request is recorded as
the admin of project "admin" (status and body) with a label;
TestLiveMovesMatchNova replays them against Berth.
"""
import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request

BASE = sys.argv[1].rstrip("/") + "/v2.1"
STATE = sys.argv[2]
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


def server(sid):
    return call("GET", "/servers/" + sid, version="2.93")[1]["server"]


def wait(sid, want, task=None):
    for _ in range(240):
        s = server(sid)
        if s["status"] == want and s["OS-EXT-STS:task_state"] == task:
            return s
        if s["status"] == "ERROR":
            break
        time.sleep(0.5)
    raise SystemExit("server %s never %s: %s" % (sid, want, s))


def wait_migration(sid, want):
    for _ in range(120):
        _, ms = call("GET", "/os-migrations?instance_uuid=" + sid, version="2.80")
        if ms["migrations"] and ms["migrations"][0]["status"] in want:
            return ms["migrations"][0]
        time.sleep(0.1)
    raise SystemExit("no migration of %s in %s" % (sid, want))


def boot(name, host=None):
    body = {"name": name, "flavorRef": "1", "imageRef": IMAGE, "networks": "none"}
    if host:
        body["host"] = host
    status, created = call("POST", "/servers", {"server": body}, "2.93")
    assert status == 202, (status, created)
    return created["server"]["id"]


status, _ = call("POST", "/flavors", {"flavor": {"name": "m1.tiny", "id": "1", "ram": 512, "vcpus": 1, "disk": 1}})
assert status in (200, 409), status
HOSTS = ["compute-1", "compute-2", "compute-3"]
sid = boot("mover", "compute-1")
wait(sid, "ACTIVE")
ACTION = "/servers/" + sid + "/action"
MIGS = "/servers/" + sid + "/migrations"
records = []
names = {sid: "{server}"}


def record(method, path, body=None, version="2.1", label=""):
    status, answer = call(method, path, body, version)
    for real, name in names.items():
        path = path.replace(real, name)
    records.append({"label": label, "method": method, "path": path, "body": body,
                    "version": version, "status": status, "answer": answer})
    return status, answer


def note(label, **kv):
    records.append(dict(label=label, **kv))


def live(body, version, label):
    return record("POST", ACTION, {"os-migrateLive": body}, version, label)


# os-migrateLive: schema refusals, by microversion.
live({}, "2.1", "live 2.1 empty body")
live({"host": "compute-2"}, "2.1", "live 2.1 without block_migration")
live({"host": "compute-2", "block_migration": False}, "2.1", "live 2.1 without disk_over_commit")
live({"block_migration": False, "disk_over_commit": False}, "2.1", "live 2.1 without host")
live({"host": "compute-2", "block_migration": "maybe", "disk_over_commit": False}, "2.1", "live 2.1 bad block_migration")
live({"host": "compute-2", "block_migration": "auto", "disk_over_commit": False}, "2.1", "live 2.1 auto before 2.25")
live({"host": "compute-2", "block_migration": False, "disk_over_commit": 3}, "2.1", "live 2.1 bad disk_over_commit")
live({"host": 5, "block_migration": False, "disk_over_commit": False}, "2.1", "live 2.1 host a number")
live({"host": "compute-2", "block_migration": False, "disk_over_commit": False, "extra": 1}, "2.1",
     "live 2.1 extra member")
live({"host": "compute-2", "block_migration": "auto", "disk_over_commit": False}, "2.25",
     "live 2.25 disk_over_commit removed")
live({"host": "compute-2"}, "2.25", "live 2.25 without block_migration")
live({"block_migration": "auto"}, "2.25", "live 2.25 without host")
live({"host": "compute-2", "block_migration": "auto", "force": True}, "2.25", "live 2.25 force before 2.30")
live({"host": "compute-2", "block_migration": "auto", "force": "yes-ish"}, "2.30", "live 2.30 bad force")
live({"host": "compute-2", "block_migration": "auto", "force": True}, "2.68", "live 2.68 force removed")
live({"host": "bad host!", "block_migration": "auto"}, "2.25", "live 2.25 host not an fqdn")
live(None, "2.1", "live null body")
# Hosts the conductor refuses: synchronous before 2.34, asynchronous after.
live({"host": "no-such-host", "block_migration": False, "disk_over_commit": False}, "2.1", "live 2.1 unknown host")
live({"host": "no-such-host", "block_migration": "auto"}, "2.25", "live 2.25 unknown host")
live({"host": "no-such-host", "block_migration": "auto"}, "2.34", "live 2.34 unknown host")
live({"host": "compute-1", "block_migration": False, "disk_over_commit": False}, "2.1", "live 2.1 to its own host")
live({"host": "compute-1", "block_migration": "auto"}, "2.25", "live 2.25 to its own host")
wait(sid, "ACTIVE")
live({"host": "compute-1", "block_migration": "auto"}, "2.34", "live 2.34 to its own host")
wait(sid, "ACTIVE")
call("PUT", "/os-services/disable", {"host": "compute-3", "binary": "nova-compute"}, "2.1")
live({"host": "compute-3", "block_migration": "auto", "force": False}, "2.30", "live 2.30 to a disabled host")
wait(sid, "ACTIVE")
live({"host": "compute-3", "block_migration": "auto"}, "2.33", "live 2.33 to a disabled host")
wait(sid, "ACTIVE")
call("PUT", "/os-services/enable", {"host": "compute-3", "binary": "nova-compute"}, "2.1")
record("GET", MIGS, version="2.23", label="server migrations none in progress")
record("GET", MIGS + "/1", version="2.23", label="server migration not in progress")
record("GET", MIGS + "/99999", version="2.23", label="server migration unknown")
record("GET", MIGS, version="2.22", label="server migrations before 2.23")
record("DELETE", MIGS + "/99999", version="2.24", label="abort unknown migration")
record("DELETE", MIGS + "/99999", version="2.23", label="abort before 2.24")
record("POST", MIGS + "/99999/action", {"force_complete": None}, "2.22", label="force_complete unknown migration")
record("POST", MIGS + "/99999/action", {"force_complete": None}, "2.21", label="force_complete before 2.22")
record("GET", "/servers/" + MISSING + "/migrations", version="2.23", label="migrations of an unknown server")

# A live migration in progress: shown, refused a second time, aborted.
live({"host": "compute-2", "block_migration": "auto"}, "2.25", "live 2.25 to a named host")
mig = wait_migration(sid, ("running",))
mid = str(mig["id"])
names[mid] = "{mig}"
record("GET", MIGS, version="2.23", label="server migrations during")
record("GET", MIGS, version="2.80", label="server migrations during at 2.80")
record("GET", MIGS + "/" + mid, version="2.23", label="server migration during")
record("GET", MIGS + "/" + mid, version="2.59", label="server migration during at 2.59")
live({"host": "compute-3", "block_migration": "auto"}, "2.25", "live while migrating")
record("POST", ACTION, {"shelve": None}, label="shelve while migrating")
record("POST", ACTION, {"evacuate": {}}, "2.29", label="evacuate while migrating")
record("POST", MIGS + "/" + mid + "/action", {"force_complete": {"x": 1}}, "2.22",
       label="force_complete with a body")
record("DELETE", MIGS + "/" + mid, version="2.24", label="abort")
wait(sid, "ACTIVE")
wait_migration(sid, ("cancelled",)) if False else time.sleep(1)
record("GET", MIGS + "/" + mid, version="2.23", label="server migration after abort")
record("DELETE", MIGS + "/" + mid, version="2.24", label="abort after abort")
record("POST", MIGS + "/" + mid + "/action", {"force_complete": None}, "2.22", label="force_complete after abort")
note("server after abort", host=server(sid)["OS-EXT-SRV-ATTR:host"])

# A second one, forced to finish.
live({"host": "compute-2", "block_migration": "auto"}, "2.68", "live 2.68 to a named host")
mig = wait_migration(sid, ("running",))
mid2 = str(mig["id"])
names[mid2] = "{mig2}"
record("POST", MIGS + "/" + mid2 + "/action", {"force_complete": None}, "2.22", label="force_complete")
wait(sid, "ACTIVE")
for _ in range(50):
    if server(sid)["OS-EXT-SRV-ATTR:host"] == "compute-2":
        break
    time.sleep(0.2)
note("server after force_complete", host=server(sid)["OS-EXT-SRV-ATTR:host"])
record("GET", MIGS + "/" + mid2, version="2.23", label="server migration after force_complete")
record("POST", MIGS + "/" + mid2 + "/action", {"force_complete": None}, "2.22",
       label="force_complete after completion")

# A scheduled one (no host), let finish by itself.
live({"host": None, "block_migration": "auto"}, "2.30", "live 2.30 scheduled")
wait_migration(sid, ("completed", "error", "failed"))
wait(sid, "ACTIVE")
note("server after scheduled live migration", host=server(sid)["OS-EXT-SRV-ATTR:host"])

# State refusals.
record("POST", ACTION, {"os-stop": None}, label="stop")
wait(sid, "SHUTOFF")
live({"host": None, "block_migration": "auto"}, "2.30", "live while stopped")
record("POST", ACTION, {"shelveOffload": None}, label="shelveOffload while stopped, not shelved")
record("POST", ACTION, {"unshelve": None}, label="unshelve while stopped")
record("POST", ACTION, {"os-start": None}, label="start")
wait(sid, "ACTIVE")
record("POST", ACTION, {"pause": None}, label="pause")
wait(sid, "PAUSED")
live({"host": None, "block_migration": "auto"}, "2.30", "live while paused")
wait(sid, "PAUSED")
time.sleep(6)
wait(sid, "PAUSED")
record("POST", ACTION, {"unpause": None}, label="unpause")
wait(sid, "ACTIVE")

# Evacuate: refused while the host is up, then with it down.
host = server(sid)["OS-EXT-SRV-ATTR:host"]
other = [h for h in HOSTS if h != host][0]
note("evacuated host", host=host)
ev = lambda body, v, label: record("POST", ACTION, {"evacuate": body}, v, label)
ev({"onSharedStorage": False}, "2.1", "evacuate 2.1 host up")
ev({}, "2.14", "evacuate 2.14 host up")
ev({}, "2.68", "evacuate 2.68 host up")
ev({}, "2.1", "evacuate 2.1 without onSharedStorage")
ev({"onSharedStorage": "maybe"}, "2.1", "evacuate 2.1 bad onSharedStorage")
ev({"onSharedStorage": False, "extra": 1}, "2.1", "evacuate 2.1 extra member")
ev({"onSharedStorage": False}, "2.14", "evacuate 2.14 onSharedStorage removed")
ev({"host": "compute-2", "force": True}, "2.14", "evacuate 2.14 force before 2.29")
ev({"force": "x"}, "2.29", "evacuate 2.29 bad force")
ev({"host": "compute-2", "force": True}, "2.68", "evacuate 2.68 force removed")
ev({"adminPass": 5}, "2.29", "evacuate bad adminPass")
ev({"host": "bad host!"}, "2.29", "evacuate host not an fqdn")
ev(None, "2.29", "evacuate null body")
ev({"host": "no-such-host"}, "2.29", "evacuate unknown host")
ev({"host": host}, "2.29", "evacuate to its own host while up")
extra = []
for v in ("2.14", "2.68"):
    s2 = boot("evac-" + v, host=host)
    wait(s2, "ACTIVE")
    extra.append((v, s2))
_, svcs = call("GET", "/os-services?binary=nova-compute&host=" + host, version="2.53")
svc = svcs["services"][0]["id"]
pids = open(os.path.join(STATE, "pids")).read().split()
# pids lines: "name pid" pairs or bare pids; find compute-N's by its cmdline.
killed = None
for p in pids:
    if not p.isdigit():
        continue
    try:
        cmd = open("/proc/%s/cmdline" % p, "rb").read().decode(errors="replace")
    except OSError:
        continue
    if "nova-compute" in cmd and (host + ".conf") in cmd:
        os.kill(int(p), signal.SIGTERM)
        killed = p
assert killed, "no pid for %s in %s" % (host, pids)
status, _ = call("PUT", "/os-services/" + svc, {"forced_down": True}, "2.53")
assert status == 200, status
ev({"host": host}, "2.29", "evacuate to its own host while down")
ev({"host": "no-such-host"}, "2.29", "evacuate unknown host while down")
ev({"onSharedStorage": False, "extra": 1}, "2.1", "evacuate 2.1 extra member while down")
ev({"onSharedStorage": False, "host": other}, "2.1", "evacuate 2.1")
wait(sid, "ACTIVE")
note("server after evacuate", host=server(sid)["OS-EXT-SRV-ATTR:host"])
record("GET", MIGS, version="2.23", label="server migrations after evacuate")
ev({}, "2.14", "evacuate 2.14 again, host up now")
# Two more evacuated from the down host, one per microversion shape of
# the answer (booted there before it went down, see above).
for v, s2 in extra:
    names[s2] = "{server2}"
    record("POST", "/servers/" + s2 + "/action", {"evacuate": {"adminPass": "secret"}}, v,
           "evacuate %s another server, adminPass" % v)
    wait(s2, "ACTIVE")
    call("DELETE", "/servers/" + s2)
    del names[s2]

# Shelving. The stand-in Glance takes no snapshot, so a shelve stays in
# task_state shelving: what is recorded is every refusal before it (the
# body checks run first) and the refusals while it shelves.
record("POST", ACTION, {"shelveOffload": None}, label="shelveOffload while active")
record("POST", ACTION, {"unshelve": None}, label="unshelve while active")
record("POST", ACTION, {"unshelve": {"availability_zone": "nova"}}, "2.77", label="unshelve 2.77 zone while active")
record("POST", ACTION, {"unshelve": {"availability_zone": "nova"}}, "2.76", label="unshelve 2.76 with a zone")
record("POST", ACTION, {"unshelve": {"availability_zone": 5}}, "2.77", label="unshelve 2.77 bad zone")
record("POST", ACTION, {"unshelve": {"availability_zone": "nova", "x": 1}}, "2.77", label="unshelve 2.77 extra")
record("POST", ACTION, {"unshelve": {}}, "2.77", label="unshelve 2.77 empty")
record("POST", ACTION, {"unshelve": {"availability_zone": "nowhere"}}, "2.77", label="unshelve 2.77 unknown zone")
record("POST", ACTION, {"unshelve": {"availability_zone": None}}, "2.77", label="unshelve 2.77 null zone")
record("POST", ACTION, {"unshelve": {"host": "compute-2"}}, "2.77", label="unshelve 2.77 host before 2.91")
record("POST", ACTION, {"unshelve": {"host": "no-such-host"}}, "2.91", label="unshelve 2.91 unknown host")
record("POST", ACTION, {"unshelve": {"host": "bad host!"}}, "2.91", label="unshelve 2.91 host not an fqdn")
record("POST", ACTION, {"unshelve": "x"}, "2.91", label="unshelve 2.91 string body")
record("POST", ACTION, {"unshelve": {"host": "compute-2", "availability_zone": None}}, "2.91",
       label="unshelve 2.91 host and null zone while active")
record("POST", ACTION, {"shelve": {"x": 1}}, label="shelve with a body")
record("POST", ACTION, {"shelve": None}, label="shelve")
time.sleep(1)
record("POST", ACTION, {"shelve": None}, label="shelve while shelving")
record("POST", ACTION, {"shelveOffload": None}, label="shelveOffload while shelving")
record("POST", ACTION, {"unshelve": None}, label="unshelve while shelving")
live({"host": None, "block_migration": "auto"}, "2.30", "live while shelving")

# os-migrations after all of it, filtered.
for q in ("", "?migration_type=live-migration", "?migration_type=evacuation", "?migration_type=bogus",
          "?source_compute=compute-1", "?status=cancelled", "?status=completed", "?status=done",
          "?instance_uuid=" + sid, "?instance_uuid=" + MISSING, "?limit=2", "?limit=0", "?limit=x",
          "?changes-since=2000-01-01T00:00:00Z", "?changes-since=bad", "?user_id=admin", "?project_id=admin",
          "?user_id=nobody"):
    for v in ("2.23", "2.59", "2.80"):
        record("GET", "/os-migrations" + q, version=v, label="os-migrations %s at %s" % (q or "all", v))
record("GET", MIGS, version="2.80", label="server migrations at the end")
json.dump({"server": sid, "records": records}, sys.stdout, indent=1, sort_keys=True)
