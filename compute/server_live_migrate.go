package compute

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/berth-project/berth/servers"
)

// os-migrateLive: migrate_server.py _migrate_live over package servers
// (live_migrate.go). Nova 26's schemas by microversion: before 2.25
// block_migration, disk_over_commit and host are all required; 2.25
// drops disk_over_commit and lets block_migration be "auto"; 2.30 adds
// force; 2.68 removes it again. A host given before 2.30, or with force
// true before 2.68, is forced (the scheduler's filters skipped, Berth's
// forced host); otherwise the scheduler checks it. Berth answers the
// refusals Nova's conductor finds later (the driver cannot live
// migrate, the server's own host, a disabled host not forced: "No valid
// host was found. ") at once with Nova's 400 at every microversion,
// where Nova from 2.34 answers 202 and fails the migration
// asynchronously (testdata/nova_live.json, live_moves_nova_test.go).

// Microversions of os-migrateLive's schema.
const (
	mvLiveAuto     = 25
	mvLiveForce    = 30
	mvLiveNoForce  = 68
	policyLiveMigr = "os_compute_api:os-migrate-server:migrate_live"
)

var (
	// liveHost is schemas/migrate_server.py host: fqdn or null.
	liveHost = append(schema{kType{"string", "null"}}, fqdn[1:]...)
	// liveBlockAuto is block_migration from 2.25: a boolean or "auto".
	liveBlockAuto = schema{kType{"boolean", "string"}, append(append(kEnum{}, booleanEnum...), "auto")}

	schemaMigrateLive = wrapped("os-migrateLive", object(kProperties{
		{"block_migration", booleanParam}, {"disk_over_commit", booleanParam}, {"host", liveHost},
	}, "block_migration", "disk_over_commit", "host"))
	schemaMigrateLive2_25 = wrapped("os-migrateLive", object(kProperties{
		{"block_migration", liveBlockAuto}, {"host", liveHost},
	}, "block_migration", "host"))
	schemaMigrateLive2_30 = wrapped("os-migrateLive", object(kProperties{
		{"block_migration", liveBlockAuto}, {"host", liveHost}, {"force", booleanParam},
	}, "block_migration", "host"))
)

// migrateLiveSchema is the schema of os-migrateLive at v.
func migrateLiveSchema(v version) schema {
	switch {
	case v.atLeast(mvLiveNoForce):
		return schemaMigrateLive2_25
	case v.atLeast(mvLiveForce):
		return schemaMigrateLive2_30
	case v.atLeast(mvLiveAuto):
		return schemaMigrateLive2_25
	}
	return schemaMigrateLive
}

// migrateLive is MigrateServerController._migrate_live: 202.
func (a *API) migrateLive(c *reqCtx) (int, any, error) {
	v, err := a.lookupServer(c, adminOnly(policyLiveMigr))
	if err != nil {
		return 0, nil, err
	}
	inner, _ := c.body.(obj).get("os-migrateLive")
	body := inner.(obj)
	host := ""
	if h, ok := body.get("host"); ok && h != nil {
		host = h.(string)
	}
	block := "auto"
	if b, _ := body.get("block_migration"); b != "auto" {
		val, _ := boolFromString(fmt.Sprint(b))
		block = fmt.Sprint(val)
	}
	force := host != "" && !c.v.atLeast(mvLiveForce)
	if c.v.atLeast(mvLiveForce) && !c.v.atLeast(mvLiveNoForce) {
		if f, ok := body.get("force"); ok {
			val, _ := boolFromString(fmt.Sprint(f))
			if val && host == "" {
				return 0, nil, errBadRequest("Can't force to a non-provided destination")
			}
			force = val
		}
	}
	_, err = a.servers.LiveMigrate(c.r.Context(), v.ID(), servers.LiveMigrateRequest{Host: host,
		BlockMigration: block, Force: force, RequestID: c.requestID})
	if err != nil {
		return 0, nil, liveFault(err, v.ID())
	}
	return http.StatusAccepted, nil, nil
}

// liveFault words a live migration's refusal as _migrate_live does.
func liveFault(err error, id string) error {
	var pre *servers.PreCheckError
	var self *servers.LiveToSelfError
	var se *servers.StateError
	var nv *servers.NoValidHostError
	switch {
	case errors.As(err, &nv):
		return errBadRequest(nv.Error())
	case errors.As(err, &pre):
		return errBadRequest(pre.Error())
	case errors.As(err, &self):
		return errBadRequest(self.Error())
	case errors.As(err, &se):
		return errConflict(se.Error())
	}
	return moveFault(err, id)
}
