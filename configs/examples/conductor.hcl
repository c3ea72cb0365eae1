# berth run conductor — the conductor of one cell.
#
#   berth run conductor -config conductor.hcl
#
# A cell conductor takes reschedule work for its cell: when a build fails
# on a host, it claims the next alternate host and casts the build there.
# Run several per cell for availability; each work item is leased by one.
# Check this file: berth config validate conductor.hcl

# A conductor must join the control plane's etcd cluster (embedded etcd is
# refused: it would be a cluster of its own). See server.hcl for every etcd
# option: prefix, dial_timeout, endpoints, username, password, tls.
etcd {
  # Must match the servers' prefix.
  prefix    = "/berth"
  endpoints = ["http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"]
}

log {
  # trace | debug | info | warn | error
  level = "info"
  # text | json
  format = "text"
}

# Where /healthz (the process runs), /readyz (etcd answers and the role's
# caches are loaded; 503 with a JSON body naming each failing check) and
# /metrics (Prometheus text format) are served. Every role accepts this
# block; without it none is served (server roles answer the three paths
# on their api, placement and scheduler listeners anyway). bind is
# host:port and is required in the block. Deployments use 8792.
status {
  bind = "0.0.0.0:8792"
}

conductor {
  # The cell this conductor serves. Required; letters, digits, ".", "_", "-".
  cell = "cell1"

  # Retries handled concurrently by this process (at least 1, default 4).
  workers = 4

  # TTL of the lease on a work item, in whole seconds (default "15s"). If
  # this conductor dies, another takes its work after at most this long.
  lease_ttl = "15s"

  # How retries are spread over the cell's conductors without racing for
  # each one (as the superconductor's build requests, see server.hcl): the
  # first-ranked conductor for a retry leases it at once, the others after
  # one or two rank_grace (default "250ms"), and only while every
  # better-ranked one has leased something within holder_idle_after
  # (default "1s"; at least rank_grace). A conductor with idle workers
  # takes the retries it ranks second for from a live but slow one once
  # they have waited steal_after (default "2s"; "0s" never; else at least
  # holder_idle_after).
  rank_grace        = "250ms"
  holder_idle_after = "1s"
  steal_after       = "2s"
}
