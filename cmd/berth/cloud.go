package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/spf13/cobra"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
)

// How the CLI finds and authenticates to the compute API: as the
// openstack CLI does, so an operator's clouds.yaml and openrc work
// unchanged, and with nothing set up, `berth dev` on this machine.
//
//  1. --os-cloud or OS_CLOUD: that cloud of clouds.yaml (searched where
//     the openstack CLI searches; OS_CLIENT_CONFIG_FILE names another),
//     parsed by gophercloud's openstack/config/clouds; a cloud with
//     auth_type none or admin_token, which gophercloud does not know,
//     calls its endpoint with its plugin's token (cloud_fixed.go).
//  2. else OS_AUTH_URL: a password (or token) login from the OS_*
//     variables, with OS_USER_DOMAIN_NAME and OS_PROJECT_DOMAIN_NAME as
//     an openrc sets them.
//  3. else OS_AUTH_TYPE=none (keystoneauth's name) or noauth: Nova's
//     noauth2, the token "OS_USERNAME:OS_PROJECT_ID" (admin:admin by
//     default) at OS_ENDPOINT or --api.
//  4. else `berth dev`'s compute API at http://127.0.0.1:8774, noauth
//     admin, as the CLI has always defaulted.
//
// In 1 and 2 the endpoints come from the token's catalog; --api (or
// BERTH_API) replaces the compute endpoint in every case, and
// --image-api the image one.

// defaultAPI is `berth dev`'s compute listener.
const defaultAPI = "http://127.0.0.1:8774"

// defaultImageAPI is `berth dev`'s image listener.
const defaultImageAPI = "http://127.0.0.1:9292"

// computeMicroversion is the compute API version the CLI asks for: Nova
// 26's newest, whose ids are UUIDs (2.53), flavors embedded in servers
// (2.47), server groups with policy and rules (2.64).
const computeMicroversion = "2.93"

// cloudFlags are the connection flags of every API command.
type cloudFlags struct {
	cloud, api, imageAPI string
	timeout              time.Duration
}

// addCloudFlags puts the connection flags on a noun, for all its verbs.
func addCloudFlags(c *cobra.Command, f *cloudFlags) {
	fs := c.PersistentFlags()
	fs.StringVar(&f.cloud, "os-cloud", "", "the cloud of clouds.yaml to use (env OS_CLOUD)")
	fs.StringVar(&f.api, "api", "", "compute API URL, replacing the catalog's (env BERTH_API; default "+defaultAPI+" without credentials)")
	fs.StringVar(&f.imageAPI, "image-api", "", "image API URL, replacing the catalog's (default "+defaultImageAPI+" without credentials)")
	fs.DurationVar(&f.timeout, "request-timeout", 2*time.Minute, "give up on one API request after this long")
}

// cloud is a connection to a Berth: the Nova API, Glance's, and Berth's
// own /v1 for what Nova has no route for.
type cloud struct {
	compute  *gophercloud.ServiceClient
	provider *gophercloud.ProviderClient
	eo       gophercloud.EndpointOpts
	imageAPI string
	// apiRoot is the compute listener's root, where /v1 is served.
	apiRoot string
	// devLogin: no credentials were given (case 4); the image API, which
	// `berth dev` serves in keystone mode, gets dev's documented login.
	devLogin      bool
	imageProvider *gophercloud.ProviderClient
	// fixedCloud names the clouds.yaml cloud with a fixed endpoint (auth
	// type none or admin_token) in use: it has no catalog.
	fixedCloud string
}

// connect authenticates as the flags and environment say (see above).
func (f *cloudFlags) connect(ctx context.Context) (*cloud, error) {
	httpClient := http.Client{Timeout: f.timeout}
	apiOverride := f.api
	if apiOverride == "" {
		apiOverride = os.Getenv("BERTH_API")
	}
	cloudName := f.cloud
	if cloudName == "" {
		cloudName = os.Getenv("OS_CLOUD")
	}
	c := &cloud{imageAPI: f.imageAPI}
	switch authType := strings.ToLower(os.Getenv("OS_AUTH_TYPE")); {
	case cloudName != "":
		fixed, err := loadFixedCloud(cloudName)
		if err != nil {
			return nil, err
		}
		if fixed != nil {
			// No Keystone: the cloud's endpoint and its plugin's token
			// (cloud_fixed.go).
			tlsConfig, err := fixed.tlsConfig()
			if err != nil {
				return nil, fmt.Errorf("clouds.yaml cloud %q: %w", cloudName, err)
			}
			if tlsConfig != nil {
				tr := http.DefaultTransport.(*http.Transport).Clone()
				tr.TLSClientConfig = tlsConfig
				httpClient.Transport = tr
			}
			c.fixedCloud = cloudName
			apiOverride = coalesce(apiOverride, fixed.computeEndpoint())
			c.imageAPI = coalesce(c.imageAPI, fixed.ImageEndpointOverride)
			c.provider = &gophercloud.ProviderClient{HTTPClient: httpClient}
			c.provider.SetToken(fixed.token())
			break
		}
		ao, eo, tlsConfig, err := clouds.Parse(clouds.WithCloudName(cloudName))
		if err != nil {
			return nil, fmt.Errorf("clouds.yaml: %w", err)
		}
		if c.provider, err = config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsConfig), config.WithHTTPClient(httpClient)); err != nil {
			return nil, fmt.Errorf("log in to cloud %q at %s: %w", cloudName, ao.IdentityEndpoint, err)
		}
		c.eo = eo
	case os.Getenv("OS_AUTH_URL") != "" && authType != "none" && authType != "noauth":
		ao := authOptionsFromEnv()
		var err error
		if c.provider, err = config.NewProviderClient(ctx, ao, config.WithHTTPClient(httpClient)); err != nil {
			return nil, fmt.Errorf("log in at %s: %w", ao.IdentityEndpoint, err)
		}
		c.eo = gophercloud.EndpointOpts{Region: os.Getenv("OS_REGION_NAME"), Availability: availability(os.Getenv("OS_INTERFACE"))}
	default:
		if apiOverride == "" {
			apiOverride = os.Getenv("OS_ENDPOINT")
		}
		if apiOverride == "" {
			apiOverride = defaultAPI
		}
		if c.imageAPI == "" {
			c.imageAPI = defaultImageAPI
		}
		c.devLogin = authType == ""
		user, project := os.Getenv("OS_USERNAME"), coalesce(os.Getenv("OS_PROJECT_ID"), os.Getenv("OS_PROJECT_NAME"))
		c.provider = &gophercloud.ProviderClient{HTTPClient: httpClient}
		c.provider.SetToken(coalesce(user, "admin") + ":" + coalesce(project, user, "admin"))
	}
	if apiOverride != "" {
		root := strings.TrimRight(apiOverride, "/")
		root = strings.TrimSuffix(root, "/v2.1")
		c.compute = &gophercloud.ServiceClient{ProviderClient: c.provider, Endpoint: root + "/v2.1/", Type: "compute"}
	} else {
		var err error
		if c.compute, err = openstack.NewComputeV2(c.provider, c.eo); err != nil {
			return nil, fmt.Errorf("compute endpoint: %w", err)
		}
	}
	c.compute.Microversion = computeMicroversion
	c.apiRoot = computeRoot(c.compute.Endpoint)
	return c, nil
}

// computeRoot is the listener's root of a compute endpoint
// ("http://h:8774/v2.1/" or ".../v2.1/PROJECT/"), where Berth's /v1 is.
func computeRoot(endpoint string) string {
	e := strings.TrimRight(endpoint, "/")
	if i := strings.LastIndex(e, "/v2.1"); i >= 0 {
		return e[:i]
	}
	return e
}

// image is the image (Glance v2) client: --image-api, else the catalog's.
func (c *cloud) image(ctx context.Context) (*gophercloud.ServiceClient, error) {
	if c.imageAPI != "" {
		pc := c.provider
		if c.devLogin {
			var err error
			if pc, err = c.devImageProvider(ctx); err != nil {
				return nil, err
			}
		}
		return &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: strings.TrimRight(c.imageAPI, "/") + "/v2/",
			ResourceBase: strings.TrimRight(c.imageAPI, "/") + "/v2/", Type: "image"}, nil
	}
	if c.fixedCloud != "" {
		return nil, fmt.Errorf("image endpoint: cloud %q of clouds.yaml has a fixed endpoint and no catalog: set its image_endpoint_override (or --image-api)", c.fixedCloud)
	}
	sc, err := openstack.NewImageV2(c.provider, c.eo)
	if err != nil {
		return nil, fmt.Errorf("image endpoint: %w", err)
	}
	return sc, nil
}

// devIdentityURL is `berth dev`'s identity API.
const devIdentityURL = "http://127.0.0.1:5000/v3"

// devImageProvider logs in with `berth dev`'s documented admin login
// (configs.DevAdminUser), as dev prints it at start: its image API
// checks tokens even though its compute API is noauth.
func (c *cloud) devImageProvider(ctx context.Context) (*gophercloud.ProviderClient, error) {
	if c.imageProvider != nil {
		return c.imageProvider, nil
	}
	ao := gophercloud.AuthOptions{IdentityEndpoint: devIdentityURL, Username: configs.DevAdminUser,
		Password: configs.DevAdminPassword, DomainName: "Default",
		Scope: &gophercloud.AuthScope{ProjectName: configs.DevAdminProject, DomainName: "Default"}}
	pc, err := config.NewProviderClient(ctx, ao, config.WithHTTPClient(c.provider.HTTPClient))
	if err != nil {
		return nil, fmt.Errorf("image API: log in with berth dev's login at %s (set OS_CLOUD or OS_AUTH_URL for another cloud): %w", devIdentityURL, err)
	}
	c.imageProvider = pc
	return pc, nil
}

// berth is Berth's own /v1 API on the compute listener, carrying the
// token (keystone mode checks it there too).
func (c *cloud) berth() *api.Client {
	cl := api.NewClient(c.apiRoot)
	cl.Token = c.provider.Token()
	cl.HTTP.Timeout = c.provider.HTTPClient.Timeout
	return cl
}

// authOptionsFromEnv is an openrc's OS_* variables as the openstack CLI
// reads them (gophercloud's AuthOptionsFromEnv does not know the user's
// and project's domains apart).
func authOptionsFromEnv() gophercloud.AuthOptions {
	env := os.Getenv
	ao := gophercloud.AuthOptions{
		IdentityEndpoint: env("OS_AUTH_URL"),
		Username:         env("OS_USERNAME"),
		UserID:           coalesce(env("OS_USER_ID"), env("OS_USERID")),
		Password:         env("OS_PASSWORD"),
		DomainID:         coalesce(env("OS_USER_DOMAIN_ID"), env("OS_DOMAIN_ID")),
		DomainName:       coalesce(env("OS_USER_DOMAIN_NAME"), env("OS_DOMAIN_NAME")),
		TokenID:          env("OS_TOKEN"),
	}
	switch {
	case env("OS_SYSTEM_SCOPE") != "":
		ao.Scope = &gophercloud.AuthScope{System: true}
	case env("OS_PROJECT_ID") != "":
		ao.Scope = &gophercloud.AuthScope{ProjectID: env("OS_PROJECT_ID")}
	case coalesce(env("OS_PROJECT_NAME"), env("OS_TENANT_NAME")) != "":
		ao.Scope = &gophercloud.AuthScope{ProjectName: coalesce(env("OS_PROJECT_NAME"), env("OS_TENANT_NAME")),
			DomainID:   coalesce(env("OS_PROJECT_DOMAIN_ID"), env("OS_DOMAIN_ID")),
			DomainName: coalesce(env("OS_PROJECT_DOMAIN_NAME"), env("OS_DOMAIN_NAME"))}
	}
	return ao
}

func availability(s string) gophercloud.Availability {
	switch strings.TrimSuffix(strings.ToLower(s), "url") {
	case "internal":
		return gophercloud.AvailabilityInternal
	case "admin":
		return gophercloud.AvailabilityAdmin
	}
	return gophercloud.AvailabilityPublic
}

func coalesce(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
