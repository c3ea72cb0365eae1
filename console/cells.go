package console

import (
	"context"
	"fmt"
	"sort"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// cellNames lists the cell records' names, sorted. The records sit
// directly under the cells prefix beside each cell's instances,
// migrations and retries, so the walk reads one key at a time and jumps
// over each cell's subtree: two small reads per cell, never a cell's
// instances.
func (c *Console) cellNames(ctx context.Context) ([]string, error) {
	var out []string
	prefix := c.cfg.Keys.CellsPrefix()
	end := clientv3.GetPrefixRangeEnd(prefix)
	from := prefix
	for {
		resp, err := c.cfg.Client.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(1), clientv3.WithKeysOnly())
		if err != nil {
			return nil, fmt.Errorf("list cells: %w", err)
		}
		if len(resp.Kvs) == 0 {
			sort.Strings(out)
			return out, nil
		}
		key := string(resp.Kvs[0].Key)
		if name, ok := etcdschema.LastSegment(key, prefix); ok {
			out = append(out, name)
			// Next: another cell named name+"-…" or name+".…" (both sort
			// before "/"), or this cell's subtree.
			from = key + "\x00"
			continue
		}
		// Inside a subtree (of a cell, or of cell0 which has no record):
		// "0" sorts right after "/", so this is the first key past it.
		from = prefix + etcdschema.FirstSegment(key, prefix) + "0"
	}
}

// withEmptyCells adds the cells that have a record but no host yet to
// groups (a new cell before discover-hosts), keeping them sorted by name.
func (c *Console) withEmptyCells(ctx context.Context, groups []*cellGroup) ([]*cellGroup, error) {
	names, err := c.cellNames(ctx)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, g := range groups {
		have[g.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			groups = append(groups, &cellGroup{Name: n, capacityIndexByClass: map[string]int{}})
		}
	}
	sort.Slice(groups, func(a, b int) bool { return groups[a].Name < groups[b].Name })
	return groups, nil
}
