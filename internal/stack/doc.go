// Package stack is Berth's composition root: it connects a process to
// etcd (or starts the embedded member), starts the roles its config
// enables on one shared etcd client, placement service and metrics
// registry, serves their HTTP listeners and the status endpoints, and
// stops them in dependency order.
//
// The processes are StartFuncs over one Stack: Server (`berth server`:
// compute API, Placement, scheduler, superconductor), Conductor, Agent,
// EtcdMember, and Dev (everything, with simulated hosts). Run is a
// process's life from connecting to the stop on a signal; cmd/berth only
// parses flags and calls it. The load tool (package bench) starts stacks
// in its own process with Connect and the Start methods, and reads them
// through the accessors of harness.go.
//
// Role names live with the roles: scheduler.Role and
// conductor.SuperconductorRole for the member keys, configs.RoleServer
// and its siblings for the processes.
package stack
