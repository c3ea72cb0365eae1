package api

import (
	"context"
	"net/http"
	"net/url"
)

// ServiceUpdate is the body of PUT /v1/services/{host}; nil fields are left
// unchanged.
type ServiceUpdate struct {
	Status         *string `json:"status,omitempty"`
	DisabledReason *string `json:"disabled_reason,omitempty"`
	ForcedDown     *bool   `json:"forced_down,omitempty"`
}

// ListServices returns every compute service.
func (c *Client) ListServices(ctx context.Context) ([]ServiceView, error) {
	var out struct {
		Services []ServiceView `json:"services"`
	}
	return out.Services, c.do(ctx, http.MethodGet, "/v1/services", nil, &out)
}

// UpdateService enables, disables or forces down a host's service.
func (c *Client) UpdateService(ctx context.Context, host string, u ServiceUpdate) (*ServiceView, error) {
	var out struct {
		Service ServiceView `json:"service"`
	}
	if err := c.do(ctx, http.MethodPut, "/v1/services/"+url.PathEscape(host), u, &out); err != nil {
		return nil, err
	}
	return &out.Service, nil
}

// ListHosts returns every host with its usage and capacity.
func (c *Client) ListHosts(ctx context.Context) ([]HostView, error) {
	var out struct {
		Hosts []HostView `json:"hosts"`
	}
	return out.Hosts, c.do(ctx, http.MethodGet, "/v1/hosts", nil, &out)
}

// ListCells returns every cell.
func (c *Client) ListCells(ctx context.Context) ([]CellView, error) {
	var out struct {
		Cells []CellView `json:"cells"`
	}
	return out.Cells, c.do(ctx, http.MethodGet, "/v1/cells", nil, &out)
}

// CreateCell records a new cell.
func (c *Client) CreateCell(ctx context.Context, name string) (*CellView, error) {
	var out struct {
		Cell CellView `json:"cell"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/cells", map[string]string{"name": name}, &out); err != nil {
		return nil, err
	}
	return &out.Cell, nil
}

// DiscoverHosts maps registered hosts whose cell exists.
func (c *Client) DiscoverHosts(ctx context.Context) (mapped, unmapped []DiscoveredHost, err error) {
	var out struct {
		Mapped   []DiscoveredHost `json:"mapped"`
		Unmapped []DiscoveredHost `json:"unmapped"`
	}
	err = c.do(ctx, http.MethodPost, "/v1/cells/discover_hosts", nil, &out)
	return out.Mapped, out.Unmapped, err
}

// GetSelection returns an instance's alternates and attempts.
func (c *Client) GetSelection(ctx context.Context, id string) (*SelectionView, error) {
	var out struct {
		Selection SelectionView `json:"selection"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/servers/"+url.PathEscape(id)+"/selection", nil, &out); err != nil {
		return nil, err
	}
	return &out.Selection, nil
}
