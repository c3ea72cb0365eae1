package main

// usage is `berth help`: every command, one line or two each.
const usage = `berth: a cloud scheduling control plane (Nova scheduler, Placement and cells v2 on etcd)

Run:
  berth dev [flags]               everything in one process, embedded etcd, simulated hosts
  berth server -config FILE       api, placement, scheduler, superconductor, identity, image roles (as the file enables)
  berth conductor -config FILE    a cell conductor
  berth agent -config FILE        a compute host agent
  berth etcd -config FILE         one member of Berth's etcd cluster (embedded etcd, no other install)
  berth bench [SCENARIO] [flags]  load tool: populate, boot, churn, failover, coldstart
                                  against simulated hosts (-h for flags)

CLI (finds the API with --api or BERTH_API, default http://127.0.0.1:8774):
  berth server create --flavor NAME [--count N] [--name NAME] [--az ZONE] [--host HOST]
                      [--hint group=ID|same_host=ID|different_host=ID]... [--wait]
  berth server list
  berth server show ID
  berth server delete ID [--wait]
  berth service list                          compute services: up/down, enabled/disabled
  berth service disable HOST [--reason TEXT]  keep new builds off HOST (sets COMPUTE_STATUS_DISABLED)
  berth service enable HOST
  berth service force-down HOST [--unset]     mark HOST down whatever its heartbeat says
  berth host list                             hosts with usage/capacity from Placement
  berth cell list | create NAME | discover-hosts
  berth selection show INSTANCE               alternates left and attempts made

Config:
  berth config validate [-role ROLE] FILE...
                                  check config files without starting anything (-role: and
                                  that they hold what ROLE needs)
  berth config render ROLE -name NAME -address IP -etcd NAME=IP,... [-cell CELL] [-data-dir DIR]
                      [-var KEY=VALUE]... [-o FILE]
                                  one machine's config for ROLE (etcd, server, conductor, agent)
                                  from the deployment templates; what deploy/ runs on each VM

Identity:
  berth identity hash-password    read a password on stdin, print its bcrypt hash for an
                                  identity { user "NAME" { password_hash = ... } } block

Debugging (reads etcd directly, no API needed):
  berth debug dump [-etcd ENDPOINTS | -config FILE] [-prefix P] [-format table|json] [-o FILE]
                                  the whole state at one etcd revision, for bug reports: a summary
                                  table (hosts, instances per cell, in-flight work, leader, etcd
                                  members), or every key decoded and grouped by kind (json);
                                  undecodable and unknown keys are shown, not fatal

Server groups and host aggregates (same --api):
  berth server-group create NAME --policy POLICY [--max-per-host N]
  berth server-group list [--all-projects] | show ID | delete ID...
  berth aggregate create NAME [--az ZONE]
  berth aggregate list | show ID | delete ID...
  berth aggregate add-host|remove-host ID HOST
  berth aggregate set ID KEY=VALUE... | unset ID KEY...
  berth aggregate sync            mirror every aggregate's hosts to placement again

Run 'berth COMMAND -h' for a command's flags.
`
