package api

import (
	"context"
	"net/http"
	"net/url"
)

// StartDrain disables host and starts moving every server off it.
func (c *Client) StartDrain(ctx context.Context, host string, r DrainRequest) (*DrainView, error) {
	return c.drain(ctx, http.MethodPost, host, r)
}

// ShowDrain returns host's drain and its progress.
func (c *Client) ShowDrain(ctx context.Context, host string) (*DrainView, error) {
	return c.drain(ctx, http.MethodGet, host, nil)
}

// CancelDrain stops host's drain from starting moves.
func (c *Client) CancelDrain(ctx context.Context, host string) (*DrainView, error) {
	return c.drain(ctx, http.MethodDelete, host, nil)
}

func (c *Client) drain(ctx context.Context, method, host string, body any) (*DrainView, error) {
	var out struct {
		Drain DrainView `json:"drain"`
	}
	if err := c.do(ctx, method, "/v1/hosts/"+url.PathEscape(host)+"/drain", body, &out); err != nil {
		return nil, err
	}
	return &out.Drain, nil
}
