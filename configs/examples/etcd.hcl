# berth run etcd — one member of Berth's etcd cluster.
#
#   berth run etcd -config etcd.hcl
#
# Runs only an etcd member (the same etcd, v3.7, that Berth's clients are
# built against), so a control plane needs no separately installed etcd.
# Run three (or five) of these on different machines with the same
# initial_cluster; servers, conductors and agents list every member's
# client_url in their etcd { endpoints = [...] }. A member waits up to 5
# minutes for a quorum of its peers at start.
# Check this file: berth config validate etcd.hcl

etcd {
  prefix = "/berth"

  # TLS on the client and peer URLs (both https then), with client
  # certificate authentication: every client and peer must present a
  # certificate from ca_file (a Berth process its machine's, etcdctl
  # --cert/--key). `berth tls cert` makes one certificate per machine that
  # is both. etcd reads the files at every handshake: a renewed
  # certificate needs no restart. Leave the block out for plain HTTP.
  tls {
    cert_file = "/etc/berth/tls/etcd-1.pem"
    key_file  = "/etc/berth/tls/etcd-1-key.pem"
    ca_file   = "/etc/berth/tls/ca.pem"
  }

  embedded {
    # This member's name: unique in the cluster, and one of the names in
    # initial_cluster.
    name = "etcd-1"

    # Where the member keeps its data; a member restarted with its data
    # rejoins by itself. Back the cluster up with `berth etcd snapshot
    # save` (docs/operations.md, "Backup and restore"), not by copying
    # this directory.
    data_dir = "/var/lib/berth/etcd"

    # Where clients (Berth's roles, etcdctl) reach this member, and where
    # its peers reach it. Use the machine's own address, not 0.0.0.0.
    # https with the tls block above, http without.
    client_url = "https://10.0.0.11:2379"
    peer_url   = "https://10.0.0.11:2380"

    # Every member of the cluster, name=peer_url, the same on every member.
    # Leave it out for a cluster of this member alone. Read only when
    # data_dir is new.
    initial_cluster = "etcd-1=https://10.0.0.11:2380,etcd-2=https://10.0.0.12:2380,etcd-3=https://10.0.0.13:2380"

    # "new" when the members in initial_cluster bootstrap together (the
    # default); "existing" when this member joins a running cluster after
    # `etcdctl member add` (a replaced machine).
    initial_cluster_state = "new"

    auto_compaction_retention = "5m"
    quota_backend_bytes       = 8589934592

    # etcd's own messages (slow disk, missed heartbeats, leader changes,
    # lost peers, quota exceeded) in this process's log, as "berth.etcd"
    # lines: debug, info, warn or error (default "warn": a healthy member
    # is silent; "info" shows its start-up, elections and compactions).
    # log { level } below still applies on top of it. Each warning
    # family (e.g. "apply request took too long") is written at most 5
    # times a second; the next line written says suppressed=N.
    log_level = "warn"

    # raft's timing, as etcd's --heartbeat-interval and --election-timeout
    # (defaults 100ms and 1s, for members on one LAN). Raise both, keeping
    # election_timeout at least 5 heartbeats, where members are far apart
    # (heartbeat about the round-trip time between them) or share busy
    # machines: a late heartbeat past election_timeout starts an election,
    # and writes wait until it is over. Every member should have the same.
    heartbeat_interval = "100ms"
    election_timeout   = "1s"
  }
}

log {
  level  = "info"
  format = "text"
}

# /healthz, /readyz (this member answers a linearizable read, so the
# cluster has quorum) and /metrics of the berth process. etcd's own
# /metrics and /health are on client_url, as for any etcd. See
# conductor.hcl for the block. Deployments use 8791.
status {
  bind = "10.0.0.11:8791"
}

# The status port's limits (see server.hcl for every option): a member's
# status port is scraped and probed, never used by many clients, so a
# small cap keeps idle connections from costing etcd descriptors.
http {
  max_connections = 256
}
