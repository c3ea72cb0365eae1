"""Drive a berth dev with openstacksdk as a user would; print JSON.

Run by TestOpenStackSDKDrivesBerth with OS_CLIENT_CONFIG_FILE pointing at
a clouds.yaml for cloud "berth". argv: image name, then flavor name.
Everything the Go test checks is printed; nothing is judged here, except
that an SDK exception propagates (non-zero exit, traceback on stderr).
"""
import json
import sys

import openstack

image_name, flavor_name = sys.argv[1], sys.argv[2]
conn = openstack.connect(cloud="berth")
out = {}

out["flavors"] = sorted(f.name for f in conn.compute.flavors())
out["images"] = sorted(i.name for i in conn.image.images())
image = next(i for i in conn.image.images() if i.name == image_name)
flavor = next(f for f in conn.compute.flavors() if f.name == flavor_name)
out["image_id"] = image.id

server = conn.compute.create_server(
    name="sdk-server", image_id=image.id, flavor_id=flavor.id, networks="none")
server = conn.compute.wait_for_server(server, status="ACTIVE", wait=60)
out["server"] = {
    "id": server.id,
    "name": server.name,
    "status": server.status,
    "image_id": server.image.id,
    "flavor_name": server.flavor.name,
    "host": server.compute_host,
}
out["servers"] = [
    {"id": s.id, "name": s.name, "status": s.status}
    for s in conn.compute.servers()]

conn.compute.delete_server(server)
conn.compute.wait_for_delete(server, wait=60)
out["servers_after_delete"] = [s.id for s in conn.compute.servers()]

out["services"] = [
    {"binary": s.binary, "host": s.host, "state": s.state, "status": s.status}
    for s in conn.compute.services()]
agg = conn.compute.create_aggregate(name="sdk-agg", availability_zone="sdk-az")
conn.compute.add_host_to_aggregate(agg, "compute-1")
out["aggregates"] = [
    {"name": a.name, "availability_zone": a.availability_zone, "hosts": a.hosts}
    for a in conn.compute.aggregates()]
conn.compute.remove_host_from_aggregate(agg, "compute-1")
conn.compute.delete_aggregate(agg)
out["aggregates_after_delete"] = [a.name for a in conn.compute.aggregates()]

json.dump(out, sys.stdout, sort_keys=True)
