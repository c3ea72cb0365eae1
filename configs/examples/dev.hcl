# berth dev — everything in one process, to try Berth in a minute.
#
#   berth dev                      # same as this file's defaults
#   berth dev -config dev.hcl
#
# Runs embedded etcd, the compute API, Placement, the scheduler, the
# superconductor, a conductor for cell "cell1" and simulated agents using
# the fake driver. Blocks left out get their defaults (configs/defaults.go),
# so this file only shows what is worth changing for development; every
# option is documented in server.hcl, all-in-one.hcl, conductor.hcl and
# agent.hcl.

etcd {
  # A throw-away data directory; delete it to start from scratch.
  embedded {
    data_dir = "berth-data/etcd"
  }
}

log {
  # debug shows each scheduling decision and etcd transaction.
  level  = "debug"
  format = "text"
}

api {
  bind = "127.0.0.1:8774"
  # noauth: Nova's noauth2, X-Auth-Token "user:project", "admin" is an
  # admin. berth dev's identity tokens (its printed login) work too; with
  # auth = "keystone" only they do (then add an identity block).
  auth = "noauth"
  # Nova's shelved_offload_time (see server.hcl): 0 offloads a shelved
  # server at once, -1 never, N > 0 after N seconds.
  shelved_offload_time = 0
  # Confirm a resize left in VERIFY_RESIZE this long (Nova's
  # resize_confirm_window; "0s", the default, never does; see server.hcl).
  resize_confirm_window = "0s"
}

placement {
  # The -placement flag overrides bind.
  bind = "127.0.0.1:8778"
  # noauth: token "admin" is an admin, "user:project" a user (see
  # server.hcl). auth = "tokens" with token blocks works here too.
  auth = "noauth"
}

scheduler {
  bind = "127.0.0.1:8775"
  # Spread new instances across the simulated hosts.
  shuffle_best_same_weighed_hosts = true
}

superconductor {
  workers = 128
}

conductor {
  cell    = "cell1"
  workers = 4
}

# Settings shared by every simulated agent; dev names the hosts itself.
agent {
  cell = "cell1"
  # Simulated agents build nothing.
  driver = "fake"
  # Report often so changes show up quickly.
  report_interval   = "2s"
  service_down_time = "10s"

  # Simulated hosts report this inventory instead of the machine's.
  inventory {
    vcpus     = 16
    memory_mb = 65536
    disk_gb   = 1000
  }

  fake {
    # Make builds take a moment, and fail some to exercise retries on
    # alternate hosts.
    build_time         = "500ms"
    failure_rate       = 0.05
    fail_reschedulable = true
  }
}
