// Package etcdauth gives each Berth machine an etcd user that may write
// only what its roles write, and turns etcd's authentication on.
//
// Users are machines, named as their certificates are (package tlsgen's
// common name): with the members' client certificate auth on, etcd takes
// a request's user from the common name of the certificate the client
// presented, so a Berth process authenticates with no password, and a
// member's in-process client does too (embedetcd's identity). A machine
// running several roles has every one of their roles: its processes share
// the machine's key, so a finer split would protect nothing.
//
// The roles, in etcd's terms (a role grants read, write or both on a key
// or a key range; a request or a transaction is allowed only if every key
// it reads or compares is readable and every key it writes writable):
//
//   - every role reads every Berth key except the identity signing key,
//     with which anyone could mint an admin's token: the key layout puts
//     it alone under /identity/, so two ranges around it say that;
//   - berth-server (compute API, Placement, scheduler, superconductor,
//     identity, image) reads and writes everything under the prefix, and
//     has etcd's root role: etcd allows defragmentation (the scheduler
//     leader's etcd space duty) to root only;
//   - berth-conductor-<cell> writes its cell (the cell record and
//     everything under /cells/<cell>/), the builds and the providers of
//     the cell's hosts (a retry's cast and claim), and, because their keys
//     are named by instance, group or migration uuid rather than by
//     cell, Placement's consumers, alternates, server groups and
//     migration mappings;
//   - berth-agent-<host> writes its host's keys (/hosts/<host>/, its host
//     mapping, its provider and provider name), its cell's instances,
//     retries and migrations, and, named by instance or migration uuid,
//     Placement's consumers (a deleted instance's allocations),
//     alternates, instance and migration mappings and server groups, and,
//     named by project and instance uuid, the quota index's entries; for
//     a move, whose steps go back and forth between two hosts of one
//     cell, also the builds, instance info and provider of its cell's
//     other hosts;
//   - berth-member (etcd-only machines) only reads: its /readyz.
//
// Where the layout does not allow a narrower grant, it says so above:
// /placement/consumers/, /alternates/, /instance_mappings/,
// /migration_mappings/, /quotas/instances/ and /server_groups/ are keyed
// by uuid (and project), not by host or cell, so an agent or a conductor
// may write any instance's there. Moving them under the cell
// (or adding a per-host index) would close that; the claim transactions
// that span them would have to follow.
package etcdauth
