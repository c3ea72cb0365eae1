package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Login is a client's password login, POST <authURL>/auth/tokens with a
// project scope, as keystoneauth's v3 password plugin sends it: it
// returns the token (X-Subject-Token), for Berth's own tools and tests
// that drive an API in keystone mode (the load tool, /v1's clients).
// authURL is the identity API's v3 root, e.g. http://127.0.0.1:5000/v3;
// hc nil is http.DefaultClient.
func Login(ctx context.Context, hc *http.Client, authURL, user, password, project string) (string, error) {
	if hc == nil {
		hc = http.DefaultClient
	}
	type named struct {
		Name   string            `json:"name"`
		Domain map[string]string `json:"domain"`
	}
	type userPW struct {
		named
		Password string `json:"password"`
	}
	def := map[string]string{"id": DefaultDomainID}
	var body struct {
		Auth struct {
			Identity struct {
				Methods  []string `json:"methods"`
				Password struct {
					User userPW `json:"user"`
				} `json:"password"`
			} `json:"identity"`
			Scope struct {
				Project named `json:"project"`
			} `json:"scope"`
		} `json:"auth"`
	}
	body.Auth.Identity.Methods = []string{"password"}
	body.Auth.Identity.Password.User = userPW{named{user, def}, password}
	body.Auth.Scope.Project = named{project, def}
	b, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	url := strings.TrimRight(authURL, "/") + "/auth/tokens"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("log in as %s on %s: %w", user, project, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("log in as %s on %s at %s: %d %s", user, project, url, resp.StatusCode, bytes.TrimSpace(msg))
	}
	token := resp.Header.Get("X-Subject-Token")
	if token == "" {
		return "", fmt.Errorf("log in as %s on %s at %s: no X-Subject-Token in the answer", user, project, url)
	}
	return token, nil
}
