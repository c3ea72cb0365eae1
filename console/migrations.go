package console

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// migrationRow is one move of a server as the pages show it (Nova's
// os-migrations row, with the attempts Berth keeps).
type migrationRow struct {
	UUID, Instance, Cell   string
	Name                   string // the server's, when read
	Type, Status           string
	Source, Dest           string
	OldFlavor, NewFlavor   string
	Attempts               []etcdschema.Attempt
	Error                  string
	InFlight               bool
	Created, Updated       time.Time
	CreatedAgo, UpdatedAgo string
}

func migrationRowOf(m *etcdschema.Migration) migrationRow {
	return migrationRow{UUID: m.UUID, Instance: m.InstanceUUID, Cell: m.Cell, Type: m.MigrationType,
		Status: m.Status, Source: m.SourceHost, Dest: m.DestHost, OldFlavor: m.OldFlavor.Name,
		NewFlavor: m.NewFlavor.Name, Attempts: m.Attempts, Error: m.Error,
		InFlight: etcdschema.MigrationInFlight(m.Status), Created: m.CreatedAt, Updated: m.UpdatedAt,
		CreatedAgo: ago(m.CreatedAt), UpdatedAgo: ago(m.UpdatedAt)}
}

// cellMigrations reads one cell's migration records (only its
// migrations prefix: servers.Store.Migrations reads every cell's whole
// subtree, instances too, which the page cannot afford at scale).
func (c *Console) cellMigrations(ctx context.Context, cell string) ([]migrationRow, error) {
	prefix := c.cfg.Keys.Migrations(cell)
	resp, err := c.cfg.Client.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("read migrations of %s: %w", cell, err)
	}
	var out []migrationRow
	for _, kv := range resp.Kvs {
		var m etcdschema.Migration
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &m); err != nil {
			c.log.Warn("console skipped an unreadable migration record", "key", string(kv.Key), "error", err)
			continue
		}
		out = append(out, migrationRowOf(&m))
	}
	return out, nil
}

// newestFirst sorts rows by creation, newest first (uuid breaks ties).
func newestFirst(rows []migrationRow) {
	sort.Slice(rows, func(a, b int) bool {
		if !rows[a].Created.Equal(rows[b].Created) {
			return rows[a].Created.After(rows[b].Created)
		}
		return rows[a].UUID < rows[b].UUID
	})
}

// recentMigration is how long after its last change a finished move
// still shows on its server's page.
const recentMigration = time.Hour

// serverMigration is the move the server page shows: the newest of the
// server's (servers.Store.InstanceMigrations, as os-migrations reads
// them) when it is in flight or changed within recentMigration; nil
// otherwise.
func (c *Console) serverMigration(ctx context.Context, cell, instance string) (*migrationRow, error) {
	all, err := c.cfg.Servers.InstanceMigrations(ctx, cell, instance)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	m := migrationRowOf(&all[len(all)-1].Migration) // oldest first
	if !m.InFlight && time.Since(m.Updated) > recentMigration {
		return nil, nil
	}
	return &m, nil
}

type migrationsData struct {
	Migrations []migrationRow
	Cells      int
}

// migrationList is every cell's migrations, newest first.
func (c *Console) migrationList(w http.ResponseWriter, r *http.Request, cl *caller) {
	ctx := r.Context()
	rev, err := c.revision(ctx)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	cells, err := c.cellNames(ctx)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	d := migrationsData{Cells: len(cells)}
	for _, cell := range cells {
		rows, err := c.cellMigrations(ctx, cell)
		if err != nil {
			c.storeError(w, r, cl, err)
			return
		}
		if err := c.nameServers(ctx, cell, rows); err != nil {
			c.storeError(w, r, cl, err)
			return
		}
		d.Migrations = append(d.Migrations, rows...)
	}
	newestFirst(d.Migrations)
	c.render(w, r, http.StatusOK, "migrations", cl, rev, "Migrations", d)
}

// namesPerRead bounds the gets in one transaction (etcd's default
// max-txn-ops is 128).
const namesPerRead = 64

// nameServers fills each row's server name from its instance record in
// cell, a batch of gets per namesPerRead rows; a server deleted since
// keeps no name.
func (c *Console) nameServers(ctx context.Context, cell string, rows []migrationRow) error {
	for start := 0; start < len(rows); start += namesPerRead {
		batch := rows[start:min(start+namesPerRead, len(rows))]
		ops := make([]clientv3.Op, len(batch))
		for i, m := range batch {
			ops[i] = clientv3.OpGet(c.cfg.Keys.CellInstance(cell, m.Instance))
		}
		resp, err := c.cfg.Client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("read the moved servers of %s: %w", cell, err)
		}
		for i, r := range resp.Responses {
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				continue
			}
			var in etcdschema.Instance
			if err := etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, &in); err != nil {
				c.log.Warn("console skipped an unreadable instance record", "key", string(kvs[0].Key), "error", err)
				continue
			}
			batch[i].Name = in.Name
		}
	}
	return nil
}
