# berth run agent — one per compute host.
#
#   berth run agent -config agent.hcl
#
# The agent registers its host, reports inventory to Placement and its
# instances to the schedulers, and builds what conductors send it.
# Check this file: berth config validate agent.hcl

# An agent must join the control plane's etcd cluster (embedded etcd is
# refused). With thousands of agents, point endpoints at an etcd gRPC
# proxy. See server.hcl for every etcd option.
etcd {
  prefix       = "/berth"
  dial_timeout = "5s"
  endpoints    = ["http://10.0.0.1:2379", "http://10.0.0.2:2379", "http://10.0.0.3:2379"]
}

log {
  level  = "info" # trace | debug | info | warn | error
  format = "text" # text | json
}

# Where /healthz (the process runs), /readyz (etcd answers and the role's
# caches are loaded; 503 with a JSON body naming each failing check) and
# /metrics (Prometheus text format) are served. Every role accepts this
# block; without it none is served (server roles answer the three paths
# on their api, placement and scheduler listeners anyway). bind is
# host:port and is required in the block. Deployments use 8793.
status {
  bind = "0.0.0.0:8793"
}

agent {
  # The compute host's name, unique in the deployment. Required; it is
  # part of etcd keys, so letters, digits, ".", "_", "-" only.
  host = "compute-1"

  # The cell this host belongs to. Required.
  cell = "cell1"

  # How instances are built: "fake" (nothing is run; see the fake block)
  # or "process" (each instance is a local process). Default "fake".
  driver = "process"

  # How often the agent refreshes its service record and inventory (default "10s").
  report_interval = "10s"

  # A host whose agent has not reported for this long is down: it is the
  # TTL of the host's liveness lease. Must exceed report_interval. Default "60s".
  service_down_time = "60s"

  # Builds run at once; more wait their turn (at least 1, default 10).
  max_concurrent_builds = 10

  # Report each instance change to the schedulers' caches (default true).
  # Must match the schedulers' track_instance_changes.
  track_instance_changes = true

  # How often the agent writes its full instance list so schedulers can
  # repair a cache that missed a change (default "120s").
  instance_sync_interval = "120s"

  # What the host offers to Placement. vcpus, memory_mb and disk_gb left
  # out (or 0) are detected from the host; everything else has the default
  # shown. Capacity = (total - reserved) * allocation_ratio.
  inventory {
    vcpus                   = 16
    memory_mb               = 65536
    disk_gb                 = 1000
    reserved_host_memory_mb = 512 # kept for the host itself (default 512)
    reserved_host_disk_gb   = 0
    reserved_host_cpus      = 0
    cpu_allocation_ratio    = 4.0 # overcommit vCPUs 4:1 (default 4.0); must be > 0
    ram_allocation_ratio    = 1.0 # no RAM overcommit (default 1.0)
    disk_allocation_ratio   = 1.0
  }

  # How often the agent re-syncs its provider (inventory and the
  # COMPUTE_STATUS_DISABLED trait from its service record); a disable made
  # while the agent was down is applied at its start anyway (default "60s").
  provider_sync_interval = "60s"

  # Nova's [compute] resource_provider_association_refresh: how long a
  # provider sync trusts what it last read or wrote of the host's provider
  # before it reads the provider again. A change of the host's inventory or
  # disabled flag reaches Placement at the next sync regardless; what waits
  # for the refresh is a change made to the provider behind the agent's
  # back (an operator's inventory edit is put back, a deleted provider is
  # created again). "0s" reads it once and never again on its own, as in
  # Nova; a failed sync still forgets what it saw. Default "300s".
  resource_provider_association_refresh = "300s"

  # Settings of the process driver, used only when driver = "process".
  # Each instance is a child process in its own process group running the
  # flavor's "berth:command" extra spec, or this command when the flavor
  # has none (default "": such builds fail, not reschedulable). It runs via
  # /bin/sh -c with BERTH_INSTANCE_UUID, BERTH_INSTANCE_NAME, BERTH_HOST and
  # BERTH_FLAVOR set. Processes outlive the agent; a restarted agent adopts
  # them from state_dir, kills those etcd does not know, and sets ERROR on
  # ACTIVE instances whose process is gone. A process that exits on its own
  # puts its instance in ERROR with the exit status.
  process {
    command    = "sleep infinity"
    state_dir  = "/var/lib/berth/process" # records in <state_dir>/<host>; default: <tmp>/berth-process
    stop_grace = "10s"                    # SIGTERM, then SIGKILL after this on delete (default "10s")
  }

  # Settings of the fake driver, used only when driver = "fake".
  fake {
    build_time         = "0s"  # how long a build pretends to take
    failure_rate       = 0.0   # probability (0..1) that a build fails
    fail               = false # every build fails
    fail_reschedulable = true  # failures ask for a retry on an alternate host rather than ERROR
    # The live migration's operations, each failed on purpose to try
    # the retries and rollbacks.
    live_migration_time = "0s"  # how long starting a live-migrated guest pretends to take
    fail_live_check     = false # the destination's pre-check fails (the next host is tried)
    fail_live_start     = false # the destination fails to start the guest (rolled back)
    fail_live_out       = false # the source fails to hand over (rolled back)
  }
}
