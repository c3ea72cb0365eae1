package compute

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

// os-migrations (migrations.py) and a server's migrations
// (server_migrations.py index) over the Migration records of every cell.
// The fields and their order per microversion are Nova 26's
// (testdata/nova_moves.json). Two differ on purpose: dest_host is the
// destination's host name (Nova shows its my_ip; Berth keeps no host
// addresses; for a live migration Nova's fake driver leaves it null,
// nova_live.json), and old_/new_instance_type_id are the flavors' ids, as
// integers when they spell one (Nova's are its database ids, which
// Berth's flavors do not have).

// Microversions that change os-migrations.
const (
	mvMigrationType     = 23 // migration_type, links; GET /servers/{id}/migrations
	mvMigrationsPaging  = 59 // uuid, limit, marker, changes-since, newest first
	mvMigrationsBefore  = 66 // changes-before
	mvMigrationsProject = 80 // user_id, project_id and their filters
)

// migrationsQuery is list_query_schema_v20 and its successors
// (list_query_params_v259, v266, v280): before 2.59 any other parameter
// is accepted.
func migrationsQuery(v version) schema {
	common := multiParams(schema{kType{"string"}})
	props := kProperties{{"hidden", common}, {"host", common}, {"instance_uuid", common},
		{"source_compute", common}, {"status", common}, {"migration_type", common}}
	if !v.atLeast(mvMigrationsPaging) {
		return queryObject(false, props)
	}
	single := func(s schema) schema { return schema{kType{"array"}, kItems{s}, kMaxItems(1)} }
	dateTime := single(schema{kType{"string"}, kFormat("date-time")})
	props = append(props,
		prop{"limit", single(schema{kType{"integer", "string"}, rePattern(`^[0-9]*$`, `^[0-9]*\n?\z`), kMinimum{limit: 0, text: "0"}, kMinLength(1)})},
		prop{"marker", single(schema{kType{"string"}})},
		prop{"changes-since", dateTime})
	if v.atLeast(mvMigrationsBefore) {
		props = append(props, prop{"changes-before", dateTime})
	}
	if v.atLeast(mvMigrationsProject) {
		props = append(props, prop{"user_id", common}, prop{"project_id", common})
	}
	return queryObject(true, props)
}

// listMigrations is MigrationsController.index.
func (a *API) listMigrations(c *reqCtx) (int, any, error) {
	q := queryObj(c.r.URL.RawQuery)
	if e := migrationsQuery(c.v).check(q, nil); e != nil {
		return 0, nil, errBadRequest(e.queryError())
	}
	all, err := a.servers.Migrations(c.r.Context())
	if err != nil {
		return 0, nil, err
	}
	list := slices.DeleteFunc(all, func(m servers.MigrationRecord) bool { return !migrationMatches(c, q, &m) })
	if c.v.atLeast(mvMigrationsPaging) {
		// migration_get_all_by_filters' sort: created_at, id, newest first.
		slices.SortFunc(list, func(x, y servers.MigrationRecord) int {
			if d := y.CreatedAt.Compare(x.CreatedAt); d != 0 {
				return d
			}
			return int(y.ID - x.ID)
		})
	} else {
		slices.SortFunc(list, func(x, y servers.MigrationRecord) int { return int(x.ID - y.ID) })
	}
	limit := maxLimit
	if c.v.atLeast(mvMigrationsPaging) {
		if m, ok := param(q, "marker"); ok {
			i := slices.IndexFunc(list, func(r servers.MigrationRecord) bool { return r.UUID == m })
			if i < 0 {
				return 0, nil, errBadRequest("Marker " + m + " could not be found.")
			}
			list = list[i+1:]
		}
		if v, ok := param(q, "limit"); ok {
			if n, ok := pyInt(v); ok && n.IsInt64() && n.Int64() < maxLimit {
				limit = int(n.Int64())
			}
		}
		if len(list) > limit {
			list = list[:limit]
		}
	}
	out := make([]obj, len(list))
	for i := range list {
		out[i] = migrationView(c, &list[i])
	}
	body := obj{{"migrations", out}}
	if c.v.atLeast(mvMigrationsPaging) && len(list) > 0 {
		if links := pageLinks(c, list[len(list)-1].UUID, len(list), limit, "os-migrations"); links != nil {
			body = append(body, member{"migrations_links", links})
		}
	}
	return http.StatusOK, body, nil
}

// migrationMatches is migration_get_all_by_filters' filters.
func migrationMatches(c *reqCtx, q obj, m *servers.MigrationRecord) bool {
	values := func(name string) []string {
		v, ok := q.get(name)
		if !ok {
			return nil
		}
		var out []string
		for _, x := range v.([]any) {
			out = append(out, x.(string))
		}
		return out
	}
	if st := values("status"); st != nil && !slices.Contains(st, m.Status) {
		return false
	}
	if h, ok := param(q, "host"); ok && m.SourceHost != h && m.DestHost != h {
		return false
	}
	for _, f := range []struct{ name, value string }{
		{"source_compute", m.SourceHost}, {"instance_uuid", m.InstanceUUID}, {"migration_type", m.MigrationType},
	} {
		if v, ok := param(q, f.name); ok && v != f.value {
			return false
		}
	}
	if h, ok := param(q, "hidden"); ok {
		// Berth hides no migration (Nova hides the cross-cell ones).
		if b, known := boolParam(h); known && b {
			return false
		}
	}
	if c.v.atLeast(mvMigrationsPaging) {
		if s, ok := param(q, "changes-since"); ok {
			if t, ok := parseISOTime(s); ok && m.UpdatedAt.Before(t) {
				return false
			}
		}
		if s, ok := param(q, "changes-before"); ok && c.v.atLeast(mvMigrationsBefore) {
			if t, ok := parseISOTime(s); ok && m.UpdatedAt.After(t) {
				return false
			}
		}
	}
	if c.v.atLeast(mvMigrationsProject) {
		if u, ok := param(q, "user_id"); ok && m.UserID != u {
			return false
		}
		if p, ok := param(q, "project_id"); ok && m.ProjectID != p {
			return false
		}
	}
	return true
}

// boolParam is oslo's strutils.bool_from_string for the words Nova's
// filters accept.
func boolParam(s string) (bool, bool) {
	switch s {
	case "1", "t", "true", "True", "TRUE", "on", "yes", "y":
		return true, true
	case "0", "f", "false", "False", "FALSE", "off", "no", "n":
		return false, true
	}
	return false, false
}

// dbTime is a DATETIME column as Nova's objects show it: seconds, no
// fraction (".000000").
func dbTime(t time.Time) string { return perfectTime(t.Truncate(time.Second)) }

// migrationView is MigrationsController._output for one migration, its
// members in Nova's (sorted) order.
func migrationView(c *reqCtx, m *servers.MigrationRecord) obj {
	o := obj{{"created_at", dbTime(m.CreatedAt)}, {"dest_compute", orNull(m.DestHost)},
		{"dest_host", orNull(m.DestHost)}, {"dest_node", orNull(m.DestNode)}, {"id", m.ID},
		{"instance_uuid", m.InstanceUUID}}
	if c.v.atLeast(mvMigrationType) {
		o = append(o, member{"migration_type", m.MigrationType})
	}
	if m.MigrationType == etcdschema.MigrationTypeEvacuation {
		// Nova's evacuation records no flavors (nova_live.json).
		o = append(o, member{"new_instance_type_id", nil}, member{"old_instance_type_id", nil})
	} else {
		o = append(o, member{"new_instance_type_id", flavorNumber(m.NewFlavor)},
			member{"old_instance_type_id", flavorNumber(m.OldFlavor)})
	}
	if c.v.atLeast(mvMigrationsProject) {
		o = append(o, member{"project_id", m.ProjectID})
	}
	o = append(o, member{"source_compute", m.SourceHost}, member{"source_node", m.SourceNode},
		member{"status", m.Status}, member{"updated_at", dbTime(m.UpdatedAt)})
	if c.v.atLeast(mvMigrationsProject) {
		o = append(o, member{"user_id", m.UserID})
	}
	if c.v.atLeast(mvMigrationsPaging) {
		o = append(o, member{"uuid", m.UUID})
	}
	return o
}

// flavorNumber is a flavor's id as a migration row shows it: the integer
// it spells, else the id itself.
func flavorNumber(f etcdschema.Flavor) any {
	if n, err := strconv.ParseInt(f.ID, 10, 64); err == nil && strconv.FormatInt(n, 10) == f.ID {
		return n
	}
	return f.ID
}

// listServerMigrations is ServerMigrationsController.index: the
// server's live migrations in progress (server_migrations_live.go); a
// server whose moves are cold has none (testdata/nova_moves.json).
func (a *API) listServerMigrations(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, adminOnly("os_compute_api:servers:migrations:index"))
	if err != nil {
		return 0, nil, err
	}
	migs, err := a.liveMigrationsInProgress(c, v)
	if err != nil {
		return 0, nil, err
	}
	out := make([]obj, len(migs))
	for i, m := range migs {
		out[i] = serverMigrationView(c, m)
	}
	return http.StatusOK, obj{{"migrations", out}}, nil
}
