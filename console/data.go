package console

import (
	"context"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/servers"
)

// What the pages show, read from the same records the APIs read.

// hostRow is one host: its service's state and status and its capacity.
type hostRow struct {
	Name, Cell     string
	Up             bool
	Disabled       bool
	ForcedDown     bool
	Reason         string
	Instances      int
	Builds         int
	FailedBuilds   int
	Resources      []resourceBar
	UpdatedAgoText string
}

// State is Nova's up or down.
func (h hostRow) State() string {
	if h.Up {
		return "up"
	}
	return "down"
}

// Status is Nova's enabled or disabled.
func (h hostRow) Status() string {
	if h.Disabled {
		return "disabled"
	}
	return "enabled"
}

// resourceBar is one resource class of a host's provider: used of what
// placement lets be allocated ((total - reserved) x allocation ratio).
type resourceBar struct {
	Class          string
	Used, Capacity int64
	High           int64 // where the bar turns to a warning: 85 %
}

// Percent is the used share, rounded down.
func (b resourceBar) Percent() int64 {
	if b.Capacity <= 0 {
		return 0
	}
	return b.Used * 100 / b.Capacity
}

// cellGroup is a cell's hosts with their counts.
type cellGroup struct {
	Name                 string
	Hosts                []hostRow
	Up, Down, Disabled   int
	Capacity             []resourceBar // the cell's sums
	capacityIndexByClass map[string]int
}

// overviewData is the overview page's.
type overviewData struct {
	Cells          []*cellGroup
	Hosts, Up      int
	Down, Disabled int
	Servers        int64 // now
	// ServerCounts are by status as of the leader's last count, made
	// CountedAgo; Counted is false before any.
	ServerCounts []statusCount
	Counted      bool
	CountedAgo   string
}

type statusCount struct {
	Status string
	Count  int
}

// hostRows reads every host with its provider's capacity, grouped by
// cell (the host mapping's, else the service's), each sorted by name.
func (c *Console) hostRows(ctx context.Context) ([]*cellGroup, error) {
	all, rev, err := c.cfg.Hosts.Read(ctx)
	if err != nil {
		return nil, err
	}
	provs, err := c.cfg.Hosts.Providers(ctx, rev)
	if err != nil {
		return nil, err
	}
	mapped, err := c.cfg.Hosts.Mappings(ctx, rev)
	if err != nil {
		return nil, err
	}
	byCell := map[string]*cellGroup{}
	for _, h := range hosts.Sorted(all) {
		row := hostRowOf(h, provs[h.Service.ProviderUUID])
		if cell, ok := mapped[row.Name]; ok {
			row.Cell = cell
		}
		g := byCell[row.Cell]
		if g == nil {
			g = &cellGroup{Name: row.Cell, capacityIndexByClass: map[string]int{}}
			byCell[row.Cell] = g
		}
		g.add(row)
	}
	out := make([]*cellGroup, 0, len(byCell))
	for _, g := range byCell {
		out = append(out, g)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

func (g *cellGroup) add(row hostRow) {
	g.Hosts = append(g.Hosts, row)
	switch {
	case !row.Up:
		g.Down++
	default:
		g.Up++
	}
	if row.Disabled {
		g.Disabled++
	}
	for _, b := range row.Resources {
		i, ok := g.capacityIndexByClass[b.Class]
		if !ok {
			i = len(g.Capacity)
			g.capacityIndexByClass[b.Class] = i
			g.Capacity = append(g.Capacity, resourceBar{Class: b.Class})
		}
		g.Capacity[i].Used += b.Used
		g.Capacity[i].Capacity += b.Capacity
		g.Capacity[i].High = g.Capacity[i].Capacity * 85 / 100
	}
}

// hostRowOf is a host's row, its bars from its provider (nil: none yet).
func hostRowOf(h *hosts.Host, p *etcdschema.Provider) hostRow {
	row := hostRow{Name: h.Service.Host, Cell: h.Service.Cell, Up: h.Up(), Disabled: h.Service.Disabled,
		ForcedDown: h.Service.ForcedDown, Reason: h.Service.DisabledReason, Instances: len(h.Instances),
		Builds: h.Builds, FailedBuilds: h.Service.FailedBuilds, UpdatedAgoText: ago(h.Service.UpdatedAt)}
	if p != nil {
		for rc, inv := range p.Inventories {
			capacity := inv.Capacity()
			row.Resources = append(row.Resources, resourceBar{Class: rc, Used: p.Usages[rc], Capacity: capacity,
				High: capacity * 85 / 100})
		}
		sort.Slice(row.Resources, func(a, b int) bool { return classOrder(row.Resources[a].Class, row.Resources[b].Class) })
	}
	return row
}

// classOrder puts the standard classes first, in Nova's order, then the
// others by name.
func classOrder(a, b string) bool {
	rank := func(rc string) int {
		switch rc {
		case "VCPU":
			return 0
		case "MEMORY_MB":
			return 1
		case "DISK_GB":
			return 2
		}
		return 3
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra < rb
	}
	return a < b
}

// serverRow is one server as the lists show it.
type serverRow struct {
	ID, Name, Status, TaskState string
	Host, Cell, Flavor          string
	Project, User               string
	Fault                       *etcdschema.Fault
	Attempts                    int
	Created                     string
}

func serverRowOf(v *servers.Server) serverRow {
	if br := v.BuildRequest; br != nil {
		return serverRow{ID: br.InstanceUUID, Name: br.Name, Status: etcdschema.StatusBuild,
			TaskState: etcdschema.TaskScheduling, Flavor: br.Flavor.Name, Project: br.ProjectID, User: br.UserID,
			Created: ago(br.CreatedAt)}
	}
	in := v.Instance
	return serverRow{ID: in.UUID, Name: in.Name, Status: in.Status, TaskState: in.TaskState, Host: in.Host,
		Cell: in.Cell, Flavor: in.Flavor.Name, Project: in.ProjectID, User: in.UserID, Fault: in.Fault,
		Attempts: in.Attempts, Created: ago(in.CreatedAt)}
}

// serverCounts are the overview's server figures without reading every
// server: how many there are now (etcd counts the instance mappings),
// and by status the leader's last count (Keys.ServerCounts, written by
// its server_counts duty every leader interval when they changed), with
// when it was made; none before a leader has counted.
func (c *Console) serverCounts(ctx context.Context, d *overviewData) error {
	k := c.cfg.Keys
	resp, err := c.cfg.Client.Txn(ctx).Then(
		clientv3.OpGet(k.InstanceMappings(), clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(k.ServerCounts())).Commit()
	if err != nil {
		return fmt.Errorf("count servers: %w", err)
	}
	d.Servers = resp.Responses[0].GetResponseRange().Count
	kvs := resp.Responses[1].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil
	}
	var rec etcdschema.ServerCounts
	if err := etcdschema.Decode(string(kvs[0].Key), kvs[0].Value, &rec); err != nil {
		return err
	}
	byStatus := map[string]int{}
	for _, n := range rec.Counts {
		byStatus[n.Status] += n.Count
	}
	for s, n := range byStatus {
		d.ServerCounts = append(d.ServerCounts, statusCount{Status: s, Count: n})
	}
	sort.Slice(d.ServerCounts, func(a, b int) bool { return d.ServerCounts[a].Status < d.ServerCounts[b].Status })
	d.Counted = true
	d.CountedAgo = ago(rec.CountedAt)
	return nil
}
