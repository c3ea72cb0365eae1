// Package console is Berth's web console: an operator's view of the
// cells (those with no host yet too), their hosts with capacity per
// resource class, the servers a page at a time with their faults,
// attempts and alternates and their moves, every cell's migrations, and
// a form to disable or enable a host and one to drain it (package drain)
// with the drain's progress. It is an http.Handler the compute API's listener serves under
// /console/ (Console.Beside), beside Nova's API and /v1, in `berth
// server` and `berth dev` alike.
//
// It reads and changes the same records the APIs do, through the same
// packages (hosts, servers, etcdschema), never through HTTP to itself.
// Pages are rendered on the server with html/template (everything
// escaped), so they work without JavaScript; a little plain JS
// (static/console.js) follows /console/events, server-sent events fed by
// one etcd watch per browser tab, and swaps in the parts of the page
// marked data-live when a host, a server or an allocation changed. The
// number of event streams a process serves at once is bounded
// (Config.MaxStreams); a stream ends with its request's deadline and the
// browser resumes it from the last revision it saw (Last-Event-ID).
//
// Auth follows the compute API's mode. With "keystone" a login form
// gets a token from Berth's identity (in process: the identity block is
// always in a process whose compute API checks tokens), kept in an
// HttpOnly, SameSite=Strict cookie and checked on every request; only
// an admin may use the console (others get a 403 page). With "noauth"
// the console opens directly and every page says auth is off. Every form
// post carries a CSRF token derived from a per-browser random cookie.
//
// A server's attempts and alternates come from servers.Store.SelectionOf,
// the reader /v1's selection show uses; its moves from
// servers.Store.InstanceMigrations; the list's pages from
// servers.Store.Page. The migrations page reads each cell's migrations
// prefix only (servers.Store.Migrations reads whole cell subtrees).
//
// A host's drain is started, shown and cancelled through drain.Store,
// the same calls /v1/hosts/{host}/drain makes; its record's prefix is
// among those the event stream follows, so its progress is live.
//
// The overview never reads every server: its total is etcd's count of
// the instance mappings (sent without them), its counts by status are
// the leader's last count (etcdschema Keys.ServerCounts, written by the
// server_counts duty every leader interval when they changed, a write
// the live stream follows), shown with its age. Its hosts table still
// reads the hosts prefix, where each host's agent reports its instances
// (small keys, not the servers' records).
package console
