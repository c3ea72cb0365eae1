# berth run server — control-plane roles against an external etcd cluster.
#
#   berth run server -config server.hcl
#
# A server runs every role whose block appears below (api, placement,
# scheduler, superconductor) and none whose block is absent, so the same
# binary can run them together or split across machines. Servers are
# active-active: start as many as you like against the same etcd.
# Check a file without starting anything: berth config validate server.hcl

# The availability zone of hosts in no aggregate with an
# availability_zone (Nova's default_availability_zone, default "nova").
# The compute API accepts this zone and those of the aggregates; every
# API and scheduler of a deployment must use the same value.
default_availability_zone = "nova"

# Where Berth keeps its shared state.
etcd {
  # Every Berth key lives under this prefix (default "/berth"). Two Berth
  # deployments can share one etcd cluster with different prefixes.
  prefix = "/berth"

  # How long to wait for the first connection (Go duration, default "5s").
  dial_timeout = "5s"

  # Client URLs of an external etcd cluster (3 or 5 members). Setting
  # endpoints means "do not start embedded etcd"; endpoints and an embedded
  # block cannot both be set.
  #
  # An external cluster must be run with auto-compaction, e.g.
  #   --auto-compaction-mode=periodic --auto-compaction-retention=5m
  # and a raised --quota-backend-bytes (8589934592): Berth writes claims at
  # thousands per second and etcd refuses writes once it reaches its quota.
  endpoints = [
    "https://10.0.0.1:2379",
    "https://10.0.0.2:2379",
    "https://10.0.0.3:2379",
  ]

  # etcd user and password when the cluster has auth enabled; leave both
  # out otherwise. A password without a username is an error.
  # username = "berth"
  # password = "change-me"

  # Client TLS for https:// endpoints. Files are checked when the process
  # starts and by `berth config validate -role`. Omit the block to use the
  # system's CA roots and no client certificate.
  tls {
    # PEM CA bundle that signed the etcd servers' certificates ("" = system roots).
    ca_file = "/etc/berth/etcd-ca.pem"
    # Client certificate and key, for clusters with --client-cert-auth; set both or neither.
    cert_file = "/etc/berth/etcd-client.pem"
    key_file  = "/etc/berth/etcd-client-key.pem"
  }
}

# Process logging.
log {
  # trace | debug | info | warn | error (default "info").
  level = "info"
  # text (human) | json (one object a line, for log shippers). Default "text".
  format = "json"
}

# The Go garbage collector of this process (every role accepts the block;
# docs/operations.md, "Garbage collection", has the measurements). The
# environment's GOGC and GOMEMLIMIT, when set, win over these and are
# logged at start.
runtime {
  # A collection starts when the heap has grown this percent past the live
  # heap (GOGC). Berth allocates much and keeps little, so collecting less
  # often saves CPU: 400 took the 10,000-host boot from 2.2 to 1.9 ms of
  # CPU per server. While gc_percent is above 100 and no GOMEMLIMIT is set,
  # the heap never grows more than max(live heap, 512 MiB) past the live
  # heap, so a large heap (100,000 hosts) costs no more memory than Go's
  # default 100 would. At least 10. Default 400.
  gc_percent = 400
  # A soft limit on the process's Go memory (GOMEMLIMIT's sizes: "2GiB",
  # "512MiB"), or "off". The collector works harder near it rather than
  # let the process grow past it; set it below a container's memory limit.
  # Default "off".
  memory_limit = "off"
}

# Limits of every HTTP listener of this process: the compute API,
# Placement, the scheduler, identity and the status port. Each listener
# gets its own max_connections; the rest bound each request. Leave the
# block out for these defaults.
http {
  # A client must send its whole request head within this (default "10s");
  # a client trickling its head (slowloris) is cut off after it.
  read_header_timeout = "10s"
  # The whole request, body included (default "1m", at least "15s"). Go
  # also ends the context of a request still running at this point, so it
  # must exceed the slowest request: a scheduler answers within its
  # superconductor's select_timeout (30s), a service update waits up to
  # 10s for its agent.
  read_timeout = "1m"
  # Until the answer is written (default "90s", at least read_timeout): a
  # client reading its answer slowly, or not at all, is cut off after it.
  write_timeout = "90s"
  # A keep-alive connection with no request for this long is closed
  # (default "1m").
  idle_timeout = "1m"
  # Every request's deadline (default "15s", at least "12s", at most
  # read_timeout): its context ends then, so the etcd calls under it are
  # cancelled, and a request etcd could not serve (no quorum) answers 503
  # in its API's error shape instead of hanging. The scheduler's listener
  # waits up to read_timeout instead: its client, the superconductor,
  # waits select_timeout (30s) for it.
  request_timeout = "15s"
  # Largest request head, in bytes (default 65536; at least 4096).
  max_header_bytes = 65536
  # Largest request body any listener reads, in bytes (default 16777216,
  # 16 MiB, what a Placement reshape may need; at least 65536). Each API
  # bounds its own requests tighter (the compute API 1 MiB, identity
  # 64 KiB); beyond its bound a request is answered 413.
  max_body_bytes = 16777216
  # Open connections per listener (default 1024). At the cap, connections
  # idle between requests (or new ones silent for 5s) are closed for new
  # clients, and new clients wait in the listen queue while every
  # connection is busy. A process lowers it to a tenth of its open-file
  # limit when that is smaller (and says so), so that full listeners
  # leave etcd its descriptors; the systemd units set LimitNOFILE=65536.
  max_connections = 1024
}

# TLS of every HTTP listener of this process (the compute API, Placement,
# the scheduler, identity, image and the status port) and of its Berth
# clients (the superconductor calling schedulers). One block per process:
# the certificate names the machine, and every listener is on it.
# `berth tls ca` and `berth tls cert` make a lab CA and a machine's
# certificate. The files are checked when the process starts and by
# `berth config validate -role ROLE`; SIGHUP reloads them without closing
# a connection. Omit the block to serve plain HTTP (berth dev).
tls {
  # The machine's certificate (its names and addresses as SANs) and key.
  cert_file = "/etc/berth/tls/server.pem"
  key_file  = "/etc/berth/tls/server-key.pem"
  # The CA this process's clients verify Berth's servers against
  # (default: the system's roots). Also give it to the openstack CLI
  # and berth's CLI as OS_CACERT.
  ca_file = "/etc/berth/tls/ca.pem"
  # Require client certificates chaining to this CA on every listener
  # (default: none; API users log in with tokens). Berth's own clients
  # present cert_file.
  # client_ca_file = "/etc/berth/tls/ca.pem"
}

# The compute API (servers, services, hosts). Remove the block to not run it here.
api {
  # host:port to listen on (default "127.0.0.1:8774"); ":8774" listens everywhere.
  bind = "0.0.0.0:8774"

  # How callers authenticate. Below /v2.1/ every request needs a token
  # (401 otherwise, as keystonemiddleware answers); the version documents
  # at / and /v2.1 are open. Nova's default policy (new defaults) then
  # decides: admin for flavor changes, services, hosts, aggregates; a
  # project's members change its own servers, its readers read them.
  #
  # keystone: tokens of this file's identity block (users log in at its
  #   API, or at another server's with the same block: every server of a
  #   deployment shares the signing key in etcd). Needs the identity block.
  # noauth (default): Nova's noauth2, for berth dev and tests only. The
  #   token "user:project" is taken at its word and the user "admin" is an
  #   admin; anyone who reaches the port can claim anything. Tokens of the
  #   identity block, when the file has one, are accepted too. Logged
  #   loudly at start-up.
  auth = "keystone"

  # Nova's allow_resize_to_same_host: whether a resize may land on the
  # server's own host (its old and new flavor then both count there until
  # the resize is confirmed). A cold migration always moves to another
  # host. Default false, as in Nova.
  allow_resize_to_same_host = false

  # Nova's shelved_offload_time, in seconds: how long a shelved server
  # keeps its host (and its allocation there) before it is offloaded.
  # 0 (the default, as in Nova) offloads it as soon as it has stopped;
  # -1 never (only shelveOffload does); N > 0 after N seconds, found by
  # the scheduler leader's shelved_offloads duty every leader_interval.
  shelved_offload_time = 0

  # Nova's resize_confirm_window: a resize or cold migration left
  # unconfirmed (VERIFY_RESIZE) this long is confirmed automatically by
  # the scheduler leader, as if its owner had (the instance action
  # confirmResize then has no user, as Nova's periodic task's). The
  # leader reads it from its own file's api block: give every server the
  # same value. Checked every scheduler leader_interval. Default "0s":
  # never, as in Nova.
  resize_confirm_window = "0s"

  # The default quotas of every project (Nova's [quota] options), which
  # os-quota-sets (`openstack quota set`) overrides per project. Every
  # limit is optional and defaults to Nova's (shown); -1 is unlimited.
  # Berth counts and enforces instances, cores, ram, server_groups and
  # server_group_members, each checked in the transaction that stores a
  # create, so concurrent creates never pass a limit; the others are
  # shown as Nova shows them.
  quota {
    instances                   = 10
    cores                       = 20
    ram                         = 51200 # MiB
    server_groups               = 10
    server_group_members        = 10
    metadata_items              = 128
    key_pairs                   = 100
    injected_files              = 5
    injected_file_content_bytes = 10240
    injected_file_path_bytes    = 255
  }
}

# The Placement API, compatible with the osc-placement CLI.
placement {
  # host:port to listen on (default "127.0.0.1:8778").
  bind = "0.0.0.0:8778"

  # The most combinations of providers one GET /allocation_candidates may
  # try (default 200000, at least 1000): the search grows as the product
  # of its request groups' candidates, and a request past this gets a 400
  # that says so, unless its limit was met first. 200000 is about two
  # seconds of a core for fourteen groups. It bounds the scheduler's
  # searches in the same process too.
  candidate_work_limit = 200000

  # How requests authenticate. Whichever mode, "/" (the
  # version document) is open, a request without X-Auth-Token gets 401, and
  # Placement's legacy default policy decides what an identity may do
  # (403 otherwise): most calls want the "admin" role; a "reader" may read
  # its own project's /usages.
  #
  # noauth (default): Placement's noauth2, for labs and tests. Token "admin"
  #   is an admin; "user:project" is that user in that project with no
  #   role; X-Roles: a,b sets the roles. Anyone who reaches the port can
  #   claim to be admin, so bind it to loopback or a trusted network.
  # tokens: X-Auth-Token must equal one token block's label, and the
  #   block says who that is; any other token gets 401. X-Roles is ignored.
  # keystone: tokens of this file's identity block, with the roles its
  #   assignments give (admin implies member implies reader). Needs the
  #   identity block.
  #
  # With the openstack CLI: openstack --os-auth-type admin_token
  #   --os-token <token> --os-endpoint http://HOST:8778 ... (README,
  #   "Use the OpenStack CLI").
  auth = "tokens"

  # One block per accepted token; the label is the secret itself. Tokens
  # are only allowed with auth = "tokens", and no two may share a label.
  token "s3cr3t-admin-token" {
    # Roles the token holder has (Placement's policy wants "admin" for most
    # calls; ["reader"] with project_id may only read that project's usages).
    roles = ["admin"]
    # Identity recorded on consumers created with this token, and the
    # project a "reader" may read usages of.
    project_id = "admin"
    user_id    = "admin"
  }
  token "s3cr3t-service-token" {
    roles      = ["admin", "service"]
    project_id = "service"
    user_id    = "berth"
  }
  # A read-only token, for monitoring: "reader" with system_scope = "all"
  # may read (GET) everything and change nothing.
  token "s3cr3t-monitoring-token" {
    roles = ["reader"]
    # "all" makes the token system-scoped (default "": scoped to project_id).
    system_scope = "all"
    user_id      = "monitoring"
  }
}

# The identity API: a Keystone v3 subset, so the openstack CLI, openstacksdk
# and gophercloud log in with a clouds.yaml (auth_url http://HOST:5000/v3,
# username, password, project_name, user_domain_name/project_domain_name
# "Default"). Users, projects and role assignments live here; tokens are
# signed with a key kept in etcd, so every server accepts every other's.
# The compute API and Placement with auth = "keystone" check them against
# this block, so a server running those needs the block even when another
# server serves the identity API (bind = "" then). The scheduler's
# select_destinations takes no user token at all: only a Berth service
# token, which the superconductor mints with the same key. The image API
# checks them the same way.
identity {
  # host:port of the API (default "127.0.0.1:5000", Keystone's port); ""
  # serves no identity API, the block only checks tokens.
  bind = "0.0.0.0:5000"
  # A token's lifetime (default "1h", Keystone's; at least "1m").
  token_ttl = "1h"
  # The region every catalog endpoint is in (default "RegionOne").
  region = "RegionOne"

  # One block per user; the label is the user name (domain "Default").
  # password_hash is bcrypt, never the password: make it with
  #   printf '%s' 'the password' | berth identity hash-password
  # These two hash "change-me-admin" and "change-me-alice": replace them.
  user "admin" {
    password_hash = "$2a$10$RRnPvTGIpcGgtycLtlbAoOSJX6nUHtiyZYzWh.Ec9Xpgw5jMtriEG"
  }
  user "alice" {
    # The id tokens and records carry (default: 32 hex digits derived from
    # the name, the same on every server). 1-64 letters, digits, _ or -.
    id            = "5d0c2a8e4f6b4c1d9e3a7b2c1d0e9f8a"
    password_hash = "$2a$10$Bxgf/0XLIzd0q57VkZIcSe1icSES65/Bdv48W6BJB9dJr2qgJpFxi"
  }

  # One block per project; the label is its name. id as for users.
  project "admin" {}
  project "demo" {
    id = "7a1e2f3c4b5d4e6f8a9b0c1d2e3f4a5b"
  }

  # A role for a user on a project or on the system ("all": Keystone's
  # system scope, for cloud-wide operations). Roles: "admin" (implies
  # member), "member" (implies reader), "reader".
  assignment {
    user    = "admin"
    project = "admin"
    role    = "admin"
  }
  assignment {
    user   = "admin"
    system = "all"
    role   = "admin"
  }
  assignment {
    user    = "alice"
    project = "demo"
    role    = "member"
  }

  # The service catalog tokens carry, one block per service type
  # ("compute", "placement", "image", "identity"). public is required;
  # internal and admin default to it.
  endpoint "compute" {
    public   = "http://controller:8774/v2.1"
    internal = "http://10.0.0.5:8774/v2.1"
    admin    = "http://10.0.0.5:8774/v2.1"
  }
  endpoint "placement" {
    public = "http://controller:8778"
  }
  endpoint "image" {
    public = "http://controller:9292"
  }
  # Left out, the identity endpoint is the URL the client reached this API
  # by, with /v3.
  endpoint "identity" {
    public = "http://controller:5000/v3"
  }
}

# The image service, a Glance v2 subset (package images): what
# `openstack server create --image NAME` resolves, and `openstack image
# list/show/create/set/delete`. A Berth image is what a server runs: its
# berth_command property is a JSON list, the program and its arguments,
# e.g. --property berth_command='["sleep", "3600"]'; an image without
# one is a name the fake driver boots. berth-sleep and berth-fake are
# created at start-up. List its URL in the identity block's catalog as
# endpoint "image".
image {
  # host:port to listen on (default "127.0.0.1:9292", Glance's port).
  bind = "0.0.0.0:9292"
  # "keystone" (default): X-Auth-Token is checked with this file's
  # identity block; creating, changing and deleting images is for
  # admins, reading for anyone with a role on a project (public images
  # and the project's own). "noauth": every caller is an admin (berth
  # dev and tests only).
  auth = "keystone"
}

# The scheduler: answers select_destinations. Option names follow Nova's
# [filter_scheduler] section.
scheduler {
  # host:port of the HTTP select_destinations endpoint (default "127.0.0.1:8775").
  bind = "0.0.0.0:8775"

  # Hosts tried per instance: the first choice plus max_attempts - 1
  # alternates from the same cell, used for retries without asking the
  # scheduler again. At least 1; default 3.
  max_attempts = 3

  # The host is picked at random among this many best-weighed hosts, so
  # that concurrent schedulers do not all race for the same one. At least
  # 1; default 1.
  host_subset_size = 1

  # Most allocation candidates asked of Placement per request (default 1000).
  max_placement_results = 1000

  # Shuffle hosts that weigh exactly the same, spreading load among equals (default false).
  shuffle_best_same_weighed_hosts = false

  # Keep a per-host instance cache fed by agents (needed by the affinity
  # and same/different host filters). false reads instances from etcd per
  # request instead. Default true.
  track_instance_changes = true

  # Export capacity, usage and free room per host (berth_host_resource_*)
  # beside the per cell, zone and class sums, which are always exported.
  # Three series per resource class per host: at 10,000 hosts, 90,000.
  # Default false.
  host_capacity_metrics = false

  # Filters in the order they run; cheap ones first. An unknown name stops
  # the scheduler at start-up. Default: the five below. A server group
  # with policy affinity or anti-affinity is refused (NoValidHost) unless
  # its filter is listed.
  #
  # Also available, off by default:
  #   AvailabilityZoneFilter            host in the requested zone (the
  #                                     zone request filter always runs)
  #   AggregateInstanceExtraSpecsFilter flavor extra specs (unscoped or
  #                                     aggregate_instance_extra_specs:)
  #                                     against aggregate metadata
  #   AggregateTypeAffinityFilter       aggregate instance_type metadata
  #   TypeAffinityFilter                one flavor per host (Nova removed
  #                                     it in Queens; kept for the seeds)
  #   CoreFilter, RamFilter, DiskFilter Nova's legacy resource filters;
  #                                     placement already enforces them,
  #                                     and the scheduler logs so once
  enabled_filters = [
    "ComputeFilter",
    "SameHostFilter",
    "DifferentHostFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
  ]

  # Stop filtering once this many hosts passed, and weigh only those: a
  # cap on the work per request, like Nomad's limit iterator or
  # kube-scheduler's percentageOfNodesToScore. The walk starts at a random
  # candidate so schedulers look at different hosts. Raised to instances x
  # max_attempts for the request. 0 filters and weighs them all (default 0).
  max_hosts_to_weigh = 0

  # Ask placement for this many candidates, walking its providers from a
  # random one, instead of max_placement_results in its own order: a
  # request filters and weighs a random sample rather than the first 1,000
  # hosts with room, a tenth of the work (kube-scheduler and Nomad sample
  # too; Nova operators lower max_placement_results with Placement's
  # randomize_allocation_candidates). Not sampled: same_host requests, a
  # hard-affinity group with members, or a cloud with no more compute
  # nodes than this. A sampled request that finds no valid host is tried
  # again over max_placement_results. Raised to instances x max_attempts.
  # 0 is Nova's behaviour (default 100).
  placement_sample_size = 100

  # Nova's tenant isolation request filter: a project named by an
  # aggregate's filter_tenant_id (or filter_tenant_id_<n>) metadata is
  # placed only on that aggregate's hosts (default false).
  limit_tenants_to_placement_aggregate = false

  # With the above, refuse projects that no aggregate names, instead of
  # placing them anywhere (default false).
  placement_aggregate_required_for_tenants = false

  # Nova's isolated aggregates: an aggregate with metadata
  # trait:<TRAIT>=required takes only requests whose flavor requires
  # <TRAIT> (default false).
  enable_isolated_aggregate_filtering = false

  # When Placement has no resource provider at all (not "none has room":
  # none exists, as with an emptied Placement during an upgrade), schedule
  # over the hosts the agents registered instead of answering NoValidHost:
  # Nova's legacy CoreFilter, RamFilter and DiskFilter check the
  # capacities the agents report, then the enabled filters and weighers
  # run, and each claim waits (up to 10 s a request, with backoff) for the
  # host's agent to create its provider again at its next provider sync.
  # Placement's request filters (aggregates, traits) are not applied on
  # this path. Each fallback is logged at info (reason=placement_empty).
  # Default false: an empty Placement is NoValidHost.
  empty_placement_fallback = false

  # TTL of the leader-election lease, in whole seconds (default "10s").
  # The leader runs the singleton duties (down hosts, orphan clean-up); a
  # dead leader is replaced after at most this long.
  election_ttl = "10s"

  # URL registered under /members/scheduler/<id> for superconductors in
  # other processes to call. Default: http://<bind>, with the machine's
  # hostname when bind listens on every address (like "0.0.0.0:8775").
  advertise_url = "http://10.0.0.5:8775"

  # The leader's singleton duties run every leader_interval (default "30s").
  leader_interval = "30s"

  # A host whose alive key is gone is recorded down at once; after this
  # long (default "60s") its pending build casts are rescheduled on their
  # alternates and its delete casts finished without it.
  down_host_grace = "60s"

  # Allocations on compute nodes whose consumer has no instance, and
  # alternates lists nothing will use, are removed once this old (default "10m").
  orphan_grace = "10m"

  # A build request nobody has leased for this long, with no superconductor
  # registered, is put in ERROR in cell0 (default "10m").
  stuck_build_request_timeout = "10m"

  # etcd's backend file never shrinks by itself: compaction frees pages
  # for reuse, only a defragmentation gives them back. The leader looks
  # at every member's size every etcd_defrag_interval (default "10m")
  # and defragments, one member at a time and the raft leader last, only
  # while every member is healthy, each member whose file is at least
  # etcd_defrag_ratio (default 2) times its live data and at least
  # etcd_defrag_min_bytes (default 268435456, 256 MiB) larger. A
  # defragmentation blocks its member while it copies the file (seconds
  # per GiB). etcd_defrag = false (default true) leaves it to the
  # operator; the NOSPACE alarm's recovery (compact, defragment, disarm;
  # docs/operations.md) runs every leader_interval either way.
  etcd_defrag           = true
  etcd_defrag_interval  = "10m"
  etcd_defrag_ratio     = 2
  etcd_defrag_min_bytes = 268435456

  # Weigher multipliers; a negative one turns a preference into an
  # aversion and 0 switches the weigher off. Each defaults to the value
  # shown. An aggregate's metadata "<name>_weight_multiplier" (e.g.
  # ram_weight_multiplier = "-1") overrides it for the aggregate's hosts;
  # a host in several such aggregates gets the lowest value, as in Nova.
  weights {
    ram                = 1.0       # prefer hosts with more free RAM (spread)
    cpu                = 1.0       # prefer hosts with more free vCPUs
    disk               = 1.0       # prefer hosts with more free disk
    io_ops             = -1.0      # avoid hosts with many builds in flight
    build_failure      = 1000000.0 # avoid hosts whose recent builds failed
    soft_affinity      = 1.0       # soft-affinity server groups: pack
    soft_anti_affinity = 1.0       # soft-anti-affinity server groups: spread
    num_instances      = 0.0       # >0 prefers hosts with fewer instances
  }
}

# The superconductor: leases build requests, asks a scheduler, hands the
# build to the chosen host's cell.
superconductor {
  # Build requests handled concurrently by this process (at least 1, default 128).
  workers = 128

  # Lease TTL of its build-request leases, whole seconds (default "10s"):
  # a dead superconductor's requests are taken over after at most this long.
  lease_ttl = "10s"

  # How long one scheduler may take to answer before the next registered
  # scheduler is asked (default "30s"). The in-process scheduler, when this
  # server runs one, is asked first.
  select_timeout = "30s"

  # How build requests are spread over the superconductors without racing
  # for each one: every request is ranked over the running superconductors
  # (rendezvous hashing); the first-ranked one leases it at once, the
  # second after rank_grace, the others after two graces (default
  # "250ms"), and they only while every better-ranked superconductor is
  # idle: it has leased nothing for holder_idle_after (default "1s"; at
  # least rank_grace). So a stalled superconductor's requests are taken
  # over about holder_idle_after after its last lease, a stopped one's at
  # once. Raise both on a machine so loaded that watch events arrive late
  # (more lease transactions lost: berth_queue_lease_attempts_total).
  rank_grace        = "250ms"
  holder_idle_after = "1s"

  # A superconductor that keeps leasing but works slowly (a starved CPU)
  # keeps its share. With steal_after (default "2s"; "0s" never; else at
  # least holder_idle_after), a superconductor with idle workers takes
  # the requests it ranks second for once they have waited this long,
  # newest first, so it meets the slow one only at the end of its backlog.
  steal_after = "2s"
}
