package compute

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/servers"
)

// GET /servers/{id}/migrations and /servers/{id}/migrations/{mid}
// (server_migrations.py index and show, 2.23): the server's live
// migrations in progress, as Nova's get_in_progress_by_instance selects
// them (queued, preparing, running, post-migrating; Berth's accepted, a
// request the superconductors still schedule, is not yet in progress,
// as Nova's is not). Berth's drivers report no memory or disk progress:
// those members are null, as for a Nova driver that reports none.

// liveInProgress are the statuses Nova calls in progress.
var liveInProgress = map[string]bool{"queued": true, etcdschema.MigrationPreparing: true,
	etcdschema.MigrationRunning: true, etcdschema.MigrationPostMigrating: true}

// liveMigrationsInProgress are server v's live migrations in progress.
func (a *API) liveMigrationsInProgress(c *reqCtx, v *servers.Server) ([]servers.MigrationRecord, error) {
	s := stateOf(v)
	migs, err := a.servers.InstanceMigrations(c.r.Context(), s.cell, s.id)
	if err != nil {
		return nil, err
	}
	var out []servers.MigrationRecord
	for _, m := range migs {
		if m.MigrationType == etcdschema.MigrationTypeLiveMigration && liveInProgress[m.Status] {
			out = append(out, m)
		}
	}
	return out, nil
}

// serverMigrationView is server_migrations.output.
func serverMigrationView(c *reqCtx, m servers.MigrationRecord) obj {
	o := obj{{"created_at", dbTime(m.CreatedAt)}, {"dest_compute", m.DestHost}, {"dest_host", m.DestHost},
		{"dest_node", m.DestNode}, {"disk_processed_bytes", nil}, {"disk_remaining_bytes", nil},
		{"disk_total_bytes", nil}, {"id", m.ID}, {"memory_processed_bytes", nil},
		{"memory_remaining_bytes", nil}, {"memory_total_bytes", nil}, {"server_uuid", m.InstanceUUID},
		{"source_compute", m.SourceHost}, {"source_node", m.SourceNode}, {"status", m.Status},
		{"updated_at", dbTime(m.UpdatedAt)}}
	if c.v.atLeast(mvMigrationsPaging) {
		o = append(o, member{"uuid", m.UUID})
	}
	if c.v.atLeast(mvMigrationsProject) {
		o = append(o, member{"user_id", m.UserID}, member{"project_id", m.ProjectID})
	}
	return o
}

// showServerMigration is ServerMigrationsController.show: 404 in
// Nova's words for a migration not in progress (or not the server's).
func (a *API) showServerMigration(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, adminOnly("os_compute_api:servers:migrations:show"))
	if err != nil {
		return 0, nil, err
	}
	s := stateOf(v)
	migs, err := a.servers.InstanceMigrations(c.r.Context(), s.cell, s.id)
	if err != nil {
		return 0, nil, err
	}
	id := c.vars["id"]
	for _, m := range migs {
		if strconv.FormatInt(m.ID, 10) != id {
			continue
		}
		switch {
		case m.MigrationType != etcdschema.MigrationTypeLiveMigration:
			return 0, nil, &fault{status: http.StatusNotFound, message: "Migration " + id + " for server " + v.ID() +
				" is not live-migration."}
		case !liveInProgress[m.Status]:
			return 0, nil, &fault{status: http.StatusNotFound, message: "Live migration " + id + " for server " + v.ID() +
				" is not in progress."}
		}
		return http.StatusOK, obj{{"migration", serverMigrationView(c, m)}}, nil
	}
	return 0, nil, &fault{status: http.StatusNotFound, message: "In-progress live migration " + id +
		" is not found for server " + v.ID() + "."}
}

// invalidStateConflict is the 409 of server_migrations.py for a server
// in the wrong state: Nova's raise_http_conflict_for_instance_invalid_state
// with an InstanceInvalidState that names no attribute, so its generic
// words (as nova_live.json recorded for abort and force_complete).
func invalidStateConflict(id, action string) error {
	return errConflict("Instance " + id + " is in an invalid state for '" + action + "'")
}

// mvAbortQueued is the microversion from which a live migration not yet
// running may be aborted.
const mvAbortQueued = 65

// abortServerMigration is ServerMigrationsController.delete (2.24): 202.
func (a *API) abortServerMigration(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, adminOnly("os_compute_api:servers:migrations:delete"))
	if err != nil {
		return 0, nil, err
	}
	err = a.servers.AbortLiveMigration(c.r.Context(), v.ID(), c.vars["id"], c.v.atLeast(mvAbortQueued), c.requestID)
	var se *servers.StateError
	var nf *servers.MigrationNotFoundError
	var ms *servers.MigrationStateError
	switch {
	case err == nil:
		return http.StatusAccepted, nil, nil
	case errors.As(err, &se):
		return 0, nil, invalidStateConflict(v.ID(), "abort live migration")
	case errors.As(err, &nf):
		return 0, nil, &fault{status: http.StatusNotFound, message: nf.Error()}
	case errors.As(err, &ms):
		return 0, nil, errBadRequest(ms.Error())
	}
	return 0, nil, moveFault(err, v.ID())
}

// mvForceComplete is the microversion of force_complete.
const mvForceComplete = 22

// schemaForceComplete is schemas/server_migrations.py force_complete.
var schemaForceComplete = schema{kType{"object"}, kProperties{{"force_complete", schema{kType{"null"}}}},
	kRequired{"force_complete"}, kNoAdditional{props: []string{"force_complete"}}}

// forceCompleteMigration is ServerMigrationsController._force_complete:
// 202; a migration that is not the server's is 400 here (404 for an
// abort), as in Nova.
func (a *API) forceCompleteMigration(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, adminOnly("os_compute_api:servers:migrations:force_complete"))
	if err != nil {
		return 0, nil, err
	}
	err = a.servers.ForceCompleteLiveMigration(c.r.Context(), v.ID(), c.vars["id"], c.requestID)
	var se *servers.StateError
	var nf *servers.MigrationNotFoundError
	var ms *servers.MigrationStateError
	switch {
	case err == nil:
		return http.StatusAccepted, nil, nil
	case errors.As(err, &se):
		return 0, nil, invalidStateConflict(v.ID(), "force_complete")
	case errors.As(err, &nf):
		return 0, nil, errBadRequest(nf.Error())
	case errors.As(err, &ms):
		return 0, nil, errBadRequest(ms.Error())
	}
	return 0, nil, moveFault(err, v.ID())
}
