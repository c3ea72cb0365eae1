# berth run server on a single machine — embedded etcd and every server role.
#
#   berth run server -config all-in-one.hcl
#
# This process starts its own single-member etcd and runs the compute API,
# Placement, the scheduler and the superconductor. Conductors and agents
# run as separate processes (conductor.hcl, agent.hcl) with
#   etcd { endpoints = ["http://127.0.0.1:2379"] }
# Check this file: berth config validate all-in-one.hcl

etcd {
  prefix       = "/berth"
  dial_timeout = "5s"

  # Start an etcd member inside this process. Its clients in this process
  # skip gRPC, which is 1.5-2x faster. Cannot be combined with endpoints,
  # username or password. It serves plain HTTP unless the etcd block has
  # tls { cert_file key_file ca_file } (see etcd.hcl): then https with
  # client certificates. With no endpoints and no embedded block, this
  # block with its defaults is used.
  embedded {
    # Where etcd keeps its data (default "berth-data/etcd", relative to
    # the working directory). Back it up like any etcd data directory.
    data_dir = "/var/lib/berth/etcd"

    # Where etcdctl and other Berth processes reach it (http without tls; default
    # "http://127.0.0.1:2379"). Use a routable address for other hosts.
    client_url = "http://127.0.0.1:2379"

    # The member's peer URL (default "http://127.0.0.1:2380").
    peer_url = "http://127.0.0.1:2380"

    # Member name (default "berth").
    name = "berth"

    # History kept before periodic compaction (default "5m"). Berth never
    # reads old revisions; short retention keeps the backend small.
    auto_compaction_retention = "5m"

    # Backend size at which etcd refuses writes (default 8589934592, 8 GiB;
    # 0 = etcd's own 2 GiB).
    quota_backend_bytes = 8589934592

    # etcd's own messages in the log, from this level up: debug, info,
    # warn or error (default "warn": a healthy member says nothing).
    log_level = "warn"
  }
}

log {
  level  = "info"
  format = "text"
}

# Listen on every interface so agents on other hosts can be reached by
# users; see server.hcl for each block's every option.
api {
  bind = "0.0.0.0:8774"
  # noauth: Nova's noauth2, "admin:<project>" is an admin, for anyone who
  # reaches the port. On a shared network use auth = "keystone" with an
  # identity block (server.hcl).
  auth = "noauth"
}

placement {
  bind = "0.0.0.0:8778"
  # noauth: token "admin" is an admin, for anyone who reaches the port.
  # On a shared network use auth = "keystone" (or "tokens"; server.hcl).
  auth = "noauth"
}

scheduler {
  # Only the HTTP endpoint other servers call; loopback is enough here.
  bind         = "127.0.0.1:8775"
  max_attempts = 3
}

superconductor {
  workers = 128
}
