// Package backup takes and restores snapshots of Berth's only state
// store, etcd: Save streams one member's database to a file (written
// whole or not at all), Status reads a snapshot's revision, key count and
// hash, and Restore turns a snapshot into a fresh member data dir for a
// NEW cluster, as `etcdutl snapshot restore` does (it is etcdutl's own
// code underneath). Restoring is for a cluster that is gone or being
// replaced: every member of the new cluster is restored from the same
// snapshot, each into its own empty data dir, and only then started.
package backup
