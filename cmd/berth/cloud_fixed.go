package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v2"
)

// A clouds.yaml cloud that names its endpoint instead of logging in to
// Keystone, which gophercloud's clouds parser does not know (it has no
// "endpoint" and needs an auth_url): keystoneauth's "none" plugin
// (auth_type: none, as OS_AUTH_TYPE=none in the environment) and its
// "admin_token" plugin (a fixed token). What the openstack CLI (6.0,
// keystoneauth) does with one, measured against a recording server:
//
//   - the endpoint is `endpoint` at the cloud's top level or under
//     `auth`; every service is called there, the compute API without a
//     catalog (GET ENDPOINT, then ENDPOINT/servers/detail...);
//     `compute_endpoint_override` is used only when there is no
//     endpoint (with both, the endpoint wins);
//   - none sends the token "notused" (noauth2 reads it as user and
//     project "notused", not an admin); admin_token sends auth.token;
//   - any other auth key (a username under none) is refused.
//
// The berth CLI does the same with two differences on purpose: an
// endpoint is taken as --api is, with or without its /v2.1 (the
// openstack CLI calls ENDPOINT/servers/... literally, so a bare
// http://host:8774 fails there), and the image API, which Berth serves
// on its own listener, is image_endpoint_override (or --image-api)
// rather than the compute endpoint.

// Fixed-endpoint auth types, keystoneauth's names.
const (
	authTypeNone       = "none"
	authTypeAdminToken = "admin_token"
)

// noneToken is the token keystoneauth's none plugin sends.
const noneToken = "notused"

// fixedCloud is what the CLI reads of such a cloud.
type fixedCloud struct {
	AuthType                string `yaml:"auth_type"`
	Endpoint                string `yaml:"endpoint"`
	ComputeEndpointOverride string `yaml:"compute_endpoint_override"`
	ImageEndpointOverride   string `yaml:"image_endpoint_override"`
	// TLS, as clouds.yaml spells it for every cloud.
	Verify     *bool  `yaml:"verify"`
	CACertFile string `yaml:"cacert"`
	CertFile   string `yaml:"cert"`
	KeyFile    string `yaml:"key"`
	Auth       struct {
		Endpoint string `yaml:"endpoint"`
		Token    string `yaml:"token"`
	} `yaml:"auth"`
}

// computeEndpoint is where the openstack CLI calls the compute API.
func (c *fixedCloud) computeEndpoint() string {
	return coalesce(c.Auth.Endpoint, c.Endpoint, c.ComputeEndpointOverride)
}

// token is what the cloud's plugin sends as X-Auth-Token.
func (c *fixedCloud) token() string {
	if c.AuthType == authTypeAdminToken {
		return c.Auth.Token
	}
	return noneToken
}

// tlsConfig is the cloud's verify, cacert, cert and key; nil when it
// sets none (Go's defaults).
func (c *fixedCloud) tlsConfig() (*tls.Config, error) {
	if c.Verify == nil && c.CACertFile == "" && c.CertFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{InsecureSkipVerify: c.Verify != nil && !*c.Verify}
	if c.CACertFile != "" {
		pem, err := os.ReadFile(c.CACertFile)
		if err != nil {
			return nil, fmt.Errorf("cacert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cacert %s: no PEM certificate in it", c.CACertFile)
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cert and key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// cloudsYAMLPaths are where the openstack CLI (and gophercloud) look for
// clouds.yaml, first found wins: OS_CLIENT_CONFIG_FILE alone when set,
// else the working directory, the user's config directory, /etc.
func cloudsYAMLPaths() []string {
	if p := os.Getenv("OS_CLIENT_CONFIG_FILE"); p != "" {
		return []string{p}
	}
	paths := []string{"clouds.yaml"}
	if dir := os.Getenv("XDG_CONFIG_HOME"); dir != "" {
		paths = append(paths, filepath.Join(dir, "openstack", "clouds.yaml"))
	} else if home, err := os.UserHomeDir(); err == nil {
		paths = append(paths, filepath.Join(home, ".config", "openstack", "clouds.yaml"))
	}
	return append(paths, "/etc/openstack/clouds.yaml")
}

// loadFixedCloud reads cloud name of the first clouds.yaml found; nil
// (and no error) when the cloud logs in to Keystone, which gophercloud
// parses, or when no file or cloud is found (gophercloud then says so).
func loadFixedCloud(name string) (*fixedCloud, error) {
	for _, p := range cloudsYAMLPaths() {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var file struct {
			Clouds map[string]fixedCloud `yaml:"clouds"`
		}
		if err := yaml.Unmarshal(data, &file); err != nil {
			return nil, fmt.Errorf("clouds.yaml %s: %w", p, err)
		}
		c, ok := file.Clouds[name]
		if !ok {
			return nil, nil
		}
		c.AuthType = strings.ToLower(c.AuthType)
		switch c.AuthType {
		case authTypeNone, authTypeAdminToken:
		default:
			return nil, nil
		}
		if c.computeEndpoint() == "" {
			return nil, fmt.Errorf("clouds.yaml %s: cloud %q has auth_type %s but no endpoint (give endpoint, or auth: {endpoint: URL})", p, name, c.AuthType)
		}
		if c.AuthType == authTypeAdminToken && c.Auth.Token == "" {
			return nil, fmt.Errorf("clouds.yaml %s: cloud %q has auth_type admin_token but no auth: {token: ...}", p, name)
		}
		return &c, nil
	}
	return nil, nil
}
