package api

import (
	"context"
	"net/http"
	"net/url"
)

// CreateServerGroup creates a server group; maxPerHost > 0 sets the
// anti-affinity rule max_server_per_host.
func (c *Client) CreateServerGroup(ctx context.Context, name, policy string, maxPerHost int) (*ServerGroupView, error) {
	body := map[string]any{"name": name, "policy": policy}
	if maxPerHost > 0 {
		body["rules"] = map[string]int{"max_server_per_host": maxPerHost}
	}
	var out struct {
		ServerGroup ServerGroupView `json:"server_group"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/server-groups", map[string]any{"server_group": body}, &out); err != nil {
		return nil, err
	}
	return &out.ServerGroup, nil
}

// ListServerGroups lists the caller's groups, or every project's.
func (c *Client) ListServerGroups(ctx context.Context, allProjects bool) ([]ServerGroupView, error) {
	path := "/v1/server-groups"
	if allProjects {
		path += "?all_projects=true"
	}
	var out struct {
		ServerGroups []ServerGroupView `json:"server_groups"`
	}
	return out.ServerGroups, c.do(ctx, http.MethodGet, path, nil, &out)
}

// GetServerGroup returns one group with its members.
func (c *Client) GetServerGroup(ctx context.Context, id string) (*ServerGroupView, error) {
	var out struct {
		ServerGroup ServerGroupView `json:"server_group"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/server-groups/"+url.PathEscape(id), nil, &out); err != nil {
		return nil, err
	}
	return &out.ServerGroup, nil
}

// DeleteServerGroup deletes a group.
func (c *Client) DeleteServerGroup(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/server-groups/"+url.PathEscape(id), nil, nil)
}

// CreateAggregate creates a host aggregate, in zone az when az != "".
func (c *Client) CreateAggregate(ctx context.Context, name, az string) (*AggregateView, error) {
	body := map[string]any{"name": name}
	if az != "" {
		body["availability_zone"] = az
	}
	return c.aggregateCall(ctx, http.MethodPost, "/v1/os-aggregates", map[string]any{"aggregate": body})
}

// ListAggregates lists every aggregate.
func (c *Client) ListAggregates(ctx context.Context) ([]AggregateView, error) {
	var out struct {
		Aggregates []AggregateView `json:"aggregates"`
	}
	return out.Aggregates, c.do(ctx, http.MethodGet, "/v1/os-aggregates", nil, &out)
}

// GetAggregate returns one aggregate.
func (c *Client) GetAggregate(ctx context.Context, id string) (*AggregateView, error) {
	return c.aggregateCall(ctx, http.MethodGet, "/v1/os-aggregates/"+url.PathEscape(id), nil)
}

// DeleteAggregate deletes an aggregate that has no hosts.
func (c *Client) DeleteAggregate(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/os-aggregates/"+url.PathEscape(id), nil, nil)
}

// AggregateAddHost puts host in the aggregate (and its provider in the
// placement aggregate).
func (c *Client) AggregateAddHost(ctx context.Context, id, host string) (*AggregateView, error) {
	return c.aggregateAction(ctx, id, map[string]any{"add_host": map[string]string{"host": host}})
}

// AggregateRemoveHost takes host out of the aggregate.
func (c *Client) AggregateRemoveHost(ctx context.Context, id, host string) (*AggregateView, error) {
	return c.aggregateAction(ctx, id, map[string]any{"remove_host": map[string]string{"host": host}})
}

// AggregateSetMetadata sets metadata keys; a nil value deletes the key.
func (c *Client) AggregateSetMetadata(ctx context.Context, id string, meta map[string]*string) (*AggregateView, error) {
	return c.aggregateAction(ctx, id, map[string]any{"set_metadata": map[string]any{"metadata": meta}})
}

// SyncAggregates mirrors every aggregate's hosts to placement again.
func (c *Client) SyncAggregates(ctx context.Context) (*SyncResult, error) {
	var out SyncResult
	return &out, c.do(ctx, http.MethodPost, "/v1/os-aggregates/sync", nil, &out)
}

func (c *Client) aggregateAction(ctx context.Context, id string, body any) (*AggregateView, error) {
	return c.aggregateCall(ctx, http.MethodPost, "/v1/os-aggregates/"+url.PathEscape(id)+"/action", body)
}

func (c *Client) aggregateCall(ctx context.Context, method, path string, body any) (*AggregateView, error) {
	var out struct {
		Aggregate AggregateView `json:"aggregate"`
	}
	if err := c.do(ctx, method, path, body, &out); err != nil {
		return nil, err
	}
	return &out.Aggregate, nil
}
