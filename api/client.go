package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client talks to Berth's own /v1 API; the CLI uses it for what Nova's
// API has no route for (cells, selections, host usage, aggregate sync).
type Client struct {
	BaseURL string
	HTTP    *http.Client
	// Token, when set, is sent as X-Auth-Token: a Keystone token from
	// Berth's identity service (or noauth's "user:project"), which /v1
	// checks as the Nova API does when the server runs with keystone auth.
	Token string
}

// NewClient returns a client for base (e.g. http://127.0.0.1:8774).
func NewClient(base string) *Client {
	return &Client{BaseURL: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}
}

// APIError is a non-2xx answer.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Message) }

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("X-Auth-Token", c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode >= 300 {
		return apiError(resp.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// CreateRequest asks for servers.
type CreateRequest struct {
	Name             string         `json:"name"`
	Flavor           string         `json:"flavor"`
	Count            int            `json:"count"`
	AvailabilityZone string         `json:"availability_zone,omitempty"`
	Hints            map[string]any `json:"scheduler_hints,omitempty"`
	// Host pins the servers to one compute host (Nova's host, 2.74).
	Host string `json:"host,omitempty"`
}

// CreateResponse lists the servers a create started.
type CreateResponse struct {
	ReservationID string `json:"reservation_id"`
	Servers       []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"servers"`
}

// CreateServers starts count servers; they build asynchronously.
func (c *Client) CreateServers(ctx context.Context, req CreateRequest) (*CreateResponse, error) {
	var out CreateResponse
	return &out, c.do(ctx, http.MethodPost, "/v1/servers", req, &out)
}

// ListServers returns the caller's project's servers.
func (c *Client) ListServers(ctx context.Context) ([]ServerView, error) {
	var out struct {
		Servers []ServerView `json:"servers"`
	}
	return out.Servers, c.do(ctx, http.MethodGet, "/v1/servers", nil, &out)
}

// GetServer returns one server.
func (c *Client) GetServer(ctx context.Context, id string) (*ServerView, error) {
	var out struct {
		Server ServerView `json:"server"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/servers/"+id, nil, &out); err != nil {
		return nil, err
	}
	return &out.Server, nil
}

// DeleteServer asks for a server's deletion.
func (c *Client) DeleteServer(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/servers/"+id, nil, nil)
}

// ListAllServers returns every project's servers (all_projects): an
// admin's call, 403 for anyone else.
func (c *Client) ListAllServers(ctx context.Context) ([]ServerView, error) {
	var out struct {
		Servers []ServerView `json:"servers"`
	}
	return out.Servers, c.do(ctx, http.MethodGet, "/v1/servers?all_projects=true", nil, &out)
}

// apiError is a non-2xx answer with its message out of Nova's error body.
func apiError(status int, data []byte) *APIError {
	msg := strings.TrimSpace(string(data))
	var e map[string]struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &e) == nil {
		for _, v := range e {
			msg = v.Message
		}
	}
	return &APIError{Status: status, Message: msg}
}
