package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/images"
)

// The load goes through the OpenStack Compute API (/v2.1), as an
// operator's tools send it: POST /servers with a flavorRef, an imageRef
// and os:scheduler_hints, os-server-groups, DELETE /servers/{id}. With
// keystone auth on in the benchmarked Berth, every request carries a
// token got once from Berth's identity API (POST /v3/auth/tokens) and
// reused; a 401 (the token expired, or the signing key changed) logs in
// again once and repeats the request. With -noauth the API is Nova's
// noauth2 and the token is "bench:bench", taken at its word: the two
// runs side by side are the cost of checking a token on every request.

// novaMicroversion is the microversion the tool asks for: 2.37 for
// networks "none", 2.64 for a server group's "policy".
const novaMicroversion = "compute 2.74"

// Credentials are a password login at an identity API's v3 root.
type Credentials struct {
	AuthURL, User, Password, Project string
}

// novaClient is the tool's client of the compute API.
type novaClient struct {
	base string // the compute API, without /v2.1
	http *http.Client
	// lean sends the API's requests when base is plain HTTP reached
	// without a proxy (leanhttp.go); nil: http sends them. Logins always
	// go through http.
	lean *leanHTTP
	// creds log in (nil: noauth, and token is noauth2's "user:project").
	creds *Credentials

	mu      sync.Mutex
	token   string
	headers *requestHeaders // token's; nil when token is ""
	logins  atomic.Int64    // successful logins, the first included
}

// requestHeaders are the headers of every request sent with one token,
// built once and shared read-only by the requests in flight (neither
// http.Client nor its Transport writes a request's Header): a boot sends
// tens of thousands, each of which built the same map before.
type requestHeaders struct {
	withBody, noBody http.Header
}

func newRequestHeaders(tok string) *requestHeaders {
	h := &requestHeaders{withBody: http.Header{}, noBody: http.Header{}}
	for _, m := range []http.Header{h.withBody, h.noBody} {
		m.Set("X-Auth-Token", tok)
		m.Set("OpenStack-API-Version", novaMicroversion)
	}
	h.withBody.Set("Content-Type", "application/json")
	return h
}

func newNovaClient(base string, hc *http.Client, creds *Credentials) *novaClient {
	c := &novaClient{base: strings.TrimRight(base, "/"), http: hc, creds: creds}
	c.lean = newLeanHTTP(c.base, hc)
	if creds == nil {
		c.setToken("bench:bench")
	}
	return c
}

// setToken makes tok the token to send (c.mu held, or c not shared yet).
func (c *novaClient) setToken(tok string) {
	c.token, c.headers = tok, newRequestHeaders(tok)
}

// currentToken is the token to send and its headers, logging in if there
// is none yet.
func (c *novaClient) currentToken(ctx context.Context) (string, *requestHeaders, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" {
		return c.token, c.headers, nil
	}
	tok, err := identity.Login(ctx, c.http, c.creds.AuthURL, c.creds.User, c.creds.Password, c.creds.Project)
	if err != nil {
		return "", nil, err
	}
	c.setToken(tok)
	c.logins.Add(1)
	return tok, c.headers, nil
}

// forget drops tok after a 401, so the next request logs in again (once,
// however many clients saw the 401 with the same token).
func (c *novaClient) forget(tok string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.creds != nil && c.token == tok {
		c.token, c.headers = "", nil
	}
}

// do sends one request to /v2.1+path with the token, again once after a
// 401, and decodes a 2xx answer into out.
func (c *novaClient) do(ctx context.Context, method, path string, in, out any) error {
	return c.doAt(ctx, method, "/v2.1"+path, in, out)
}

// doAt is do at the compute listener's path (Berth's /v1 beside Nova's).
func (c *novaClient) doAt(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		tok, headers, err := c.currentToken(ctx)
		if err != nil {
			return err
		}
		header := headers.noBody
		if in != nil {
			header = headers.withBody
		}
		buf := answerBufs.Get().(*bytes.Buffer)
		err = c.send(ctx, method, path, header, body, buf, attempt, tok, out)
		buf.Reset()
		answerBufs.Put(buf)
		if errors.Is(err, errLoginAgain) {
			continue
		}
		return err
	}
}

// send sends one request and reads its answer into buf (see answer).
func (c *novaClient) send(ctx context.Context, method, path string, header http.Header, body []byte, buf *bytes.Buffer,
	attempt int, tok string, out any) error {
	if c.lean != nil {
		status, err := c.lean.do(ctx, method, path, header, body, buf)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		return c.answerRead(status, buf.Bytes(), method, path, attempt, tok, out)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = header
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return c.answer(resp, buf, method, path, attempt, tok, out)
}

// errLoginAgain is answer's word that a 401 dropped the token and the
// request is to be sent again.
var errLoginAgain = errors.New("log in again")

// answer reads resp into buf (the connection stays open for the next
// request) and decodes a 2xx answer into out.
func (c *novaClient) answer(resp *http.Response, buf *bytes.Buffer, method, path string, attempt int, tok string, out any) error {
	_, err := buf.ReadFrom(io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("%s %s: read the answer: %w", method, path, err)
	}
	return c.answerRead(resp.StatusCode, buf.Bytes(), method, path, attempt, tok, out)
}

// answerRead is answer's verdict on an answer read whole: a 401 drops
// the token (errLoginAgain), another status of 300 or more is an
// *api.APIError, and a 2xx body is decoded into out.
func (c *novaClient) answerRead(status int, data []byte, method, path string, attempt int, tok string, out any) error {
	if status == http.StatusUnauthorized && c.creds != nil && attempt == 0 {
		c.forget(tok)
		return errLoginAgain
	}
	if status >= 300 {
		return &api.APIError{Status: status, Message: novaFaultMessage(data)}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return nil
}

// answerBufs hold the answers being read, one per request at a time: a
// boot reads tens of thousands, each into a buffer of its own before.
var answerBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// novaFaultMessage is the message of Nova's {"<kind>": {"message"}}
// (or keystonemiddleware's {"error": {...}}), else the body.
func novaFaultMessage(data []byte) string {
	var e map[string]struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &e) == nil {
		for _, v := range e {
			if v.Message != "" {
				return v.Message
			}
		}
	}
	return strings.TrimSpace(string(data))
}

// benchFlavorIDs are the default flavors' Nova ids (flavorRef) by name.
var benchFlavorIDs = func() map[string]string {
	m := map[string]string{}
	for _, f := range api.DefaultFlavors() {
		m[f.Name] = f.ID
	}
	return m
}()

// benchImage is the image every server boots: the default image of the
// fake driver the simulated hosts run (a name, no command).
var benchImage = images.DefaultID(images.DefaultFakeImage)

// createServer is POST /v2.1/servers of one server; it returns its id.
func (c *novaClient) createServer(ctx context.Context, req api.CreateRequest) (string, error) {
	flavor, ok := benchFlavorIDs[req.Flavor]
	if !ok {
		return "", fmt.Errorf("create server: no default flavor %q", req.Flavor)
	}
	body := createBody{Server: createServer{Name: req.Name, FlavorRef: flavor, ImageRef: benchImage, Networks: "none",
		AvailabilityZone: req.AvailabilityZone, Host: req.Host}, Hints: req.Hints}
	var out struct {
		Server struct {
			ID string `json:"id"`
		} `json:"server"`
	}
	if err := c.do(ctx, http.MethodPost, "/servers", body, &out); err != nil {
		return "", err
	}
	if out.Server.ID == "" {
		return "", fmt.Errorf("create server: no id in the answer")
	}
	return out.Server.ID, nil
}

// createBody is POST /v2.1/servers's body, typed: encoding/json writes a
// struct without the sorting and boxing a map of any costs.
type createBody struct {
	Server createServer   `json:"server"`
	Hints  map[string]any `json:"os:scheduler_hints,omitempty"`
}

type createServer struct {
	Name             string `json:"name"`
	FlavorRef        string `json:"flavorRef"`
	ImageRef         string `json:"imageRef"`
	Networks         string `json:"networks"`
	AvailabilityZone string `json:"availability_zone,omitempty"`
	Host             string `json:"host,omitempty"`
}

// createServerGroup is POST /v2.1/os-server-groups; it returns the id.
func (c *novaClient) createServerGroup(ctx context.Context, name, policy string) (string, error) {
	var out struct {
		ServerGroup struct {
			ID string `json:"id"`
		} `json:"server_group"`
	}
	body := map[string]any{"server_group": map[string]any{"name": name, "policy": policy}}
	if err := c.do(ctx, http.MethodPost, "/os-server-groups", body, &out); err != nil {
		return "", err
	}
	return out.ServerGroup.ID, nil
}

// deleteServer is DELETE /v2.1/servers/{id}.
func (c *novaClient) deleteServer(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/servers/"+id, nil, nil)
}

// novaServer is the part of Nova's server view the tool reads.
type novaServer struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Host   string `json:"OS-EXT-SRV-ATTR:host"`
}

// showServer is GET /v2.1/servers/{id}.
func (c *novaClient) showServer(ctx context.Context, id string) (*novaServer, error) {
	var out struct {
		Server novaServer `json:"server"`
	}
	if err := c.do(ctx, http.MethodGet, "/servers/"+id, nil, &out); err != nil {
		return nil, err
	}
	return &out.Server, nil
}
