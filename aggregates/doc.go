// Package aggregates keeps Nova's host aggregates in etcd: the operations
// of nova.compute.api.AggregateAPI without HTTP, shared by Nova's
// /os-aggregates (package compute) and Berth's /v1 (package api), each of
// which words the typed errors here in its own way.
//
// An aggregate is one etcdschema.Aggregate record under Keys.Aggregate,
// its name reserved under Keys.AggregateName and its integer id (Nova's
// /os-aggregates/{id}) allocated from Keys.AggregateLastID. The rules
// span aggregates (unique names, one availability zone per host), so
// every change reads all of them at one revision and commits only if no
// aggregate changed since (Store.mutate): two concurrent changes cannot
// each pass a check the other breaks. Aggregates change rarely; a lost
// race costs one more read.
//
// Adding a host also mirrors it into placement: the host's compute node
// provider joins the placement aggregate named by the aggregate's uuid,
// as Nova's API does, so request filters can ask placement for
// member_of. Records written before integer ids existed get one on the
// first read (ids.go).
//
// Aggregates belong to no project: they group hosts, and every operation
// on them is an admin's (the API's policy, Nova's ADMIN rule); this
// package takes no caller.
package aggregates
