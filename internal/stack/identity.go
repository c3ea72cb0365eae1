package stack

import (
	"context"
	"fmt"
	"net/http"

	"github.com/berth-project/berth/compute"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/placement/httpapi"
)

// How a process's APIs check credentials:
//   - the identity block, when the file has one, is built into an
//     identity.Service (its directory, and the deployment's signing key
//     read from etcd) whether or not this process serves the identity
//     API (bind = ""): the compute API and Placement in "keystone" mode
//     verify tokens with it, and in "noauth" mode the compute API takes
//     its tokens too (so `berth dev` accepts its identity's logins as
//     well as noauth2's "user:project");
//   - the scheduler's select_destinations always wants a service token
//     (identity.ServiceTokens), which the superconductor mints with the
//     same key: it needs no identity block, only etcd.

// noAuthWarning is logged at start-up for every API left in noauth.
const noAuthWarning = "auth: noauth — every caller is admin; for development only"

// signingKey reads (or, on the deployment's first server, creates) the
// token signing key in etcd, once per process.
func (s *Stack) signingKey(ctx context.Context) ([]byte, error) {
	if s.tokenKey == nil {
		key, err := identity.LoadSigningKey(ctx, s.cli, s.keys)
		if err != nil {
			return nil, err
		}
		s.tokenKey = key
	}
	return s.tokenKey, nil
}

// identityService is the identity block's Service (nil without a block).
func (s *Stack) identityService(ctx context.Context) (*identity.Service, error) {
	c := s.cfg.Identity
	if c == nil || s.identity != nil {
		return s.identity, nil
	}
	key, err := s.signingKey(ctx)
	if err != nil {
		return nil, err
	}
	svc, err := identity.New(identityConfig(c), key)
	if err != nil {
		return nil, err
	}
	s.identity = svc
	return svc, nil
}

// serviceTokens mints and checks the tokens of Berth's own processes.
func (s *Stack) serviceTokens(ctx context.Context) (*identity.ServiceTokens, error) {
	if s.svcTokens == nil {
		key, err := s.signingKey(ctx)
		if err != nil {
			return nil, err
		}
		if s.svcTokens, err = identity.NewServiceTokens(key); err != nil {
			return nil, err
		}
	}
	return s.svcTokens, nil
}

// schedulerClient is how this process calls remote schedulers: with a
// service token on every request, which their RequireServiceToken wants,
// verifying them with the tls block's CA (tls.go).
func (s *Stack) schedulerClient(ctx context.Context) (*http.Client, error) {
	tokens, err := s.serviceTokens(ctx)
	if err != nil {
		return nil, err
	}
	base, err := s.httpTransport()
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tokens.Transport(base)}, nil
}

// computeAuth is the compute API's authentication for the api block.
func (s *Stack) computeAuth(ctx context.Context, c *configs.API) (compute.Auth, error) {
	svc, err := s.identityService(ctx)
	if err != nil {
		return compute.Auth{}, err
	}
	auth := compute.Auth{Mode: compute.AuthMode(c.Auth)}
	if svc != nil {
		auth.Verifier, auth.IdentityURI = svc.Verifier(), s.cfg.Identity.PublicURL()
	}
	if c.Auth == configs.AuthNoAuth {
		s.log.Warn(noAuthWarning, "api", "compute", "identity_tokens_accepted", svc != nil)
	} else {
		s.log.Info("compute API auth", "mode", c.Auth, "identity", auth.IdentityURI, "v1", "same tokens and policies")
	}
	if auth.Mode == compute.AuthKeystone && svc == nil {
		return compute.Auth{}, fmt.Errorf("compute API: auth = %q without an identity block", c.Auth)
	}
	return auth, nil
}

// placementAuth adds the identity Service to the Placement API's options
// in keystone mode.
func (s *Stack) placementAuth(ctx context.Context, p *configs.Placement) (httpapi.Options, error) {
	o := placementHandlerOptions(p)
	switch p.Auth {
	case configs.AuthNoAuth:
		s.log.Warn(noAuthWarning, "api", "placement")
	case configs.AuthKeystone:
		svc, err := s.identityService(ctx)
		if err != nil {
			return o, err
		}
		if svc == nil {
			return o, fmt.Errorf("placement: auth = %q without an identity block", p.Auth)
		}
		o.Auth.Verifier, o.Auth.IdentityURI = svc.Verifier(), s.cfg.Identity.PublicURL()
	}
	s.log.Info("placement API auth", "mode", p.Auth, "tokens", len(p.Tokens))
	return o, nil
}

// startIdentity serves the identity API of the config's identity block,
// signing with the deployment's key (created in etcd by the first
// server); with bind = "" it serves nothing, the block only checks tokens.
func (s *Stack) startIdentity(ctx context.Context, c *configs.Identity) error {
	svc, err := s.identityService(ctx)
	if err != nil {
		return err
	}
	if c.Bind == "" {
		s.log.Info("identity block checks tokens; no identity API here (bind = \"\")", "users", len(c.Users), "projects", len(c.Projects))
		return nil
	}
	s.log.Info("identity API", "users", len(c.Users), "projects", len(c.Projects), "token_ttl", c.TokenTTL)
	return s.Serve("identity", c.Bind, identity.NewAPI(svc, s.log.Named("identity")))
}

// identityConfig maps the HCL identity block to the identity package's.
func identityConfig(c *configs.Identity) identity.Config {
	ic := identity.Config{Region: c.Region, TokenTTL: c.TokenTTL}
	for _, u := range c.Users {
		ic.Users = append(ic.Users, identity.User{ID: u.ID, Name: u.Name, PasswordHash: u.PasswordHash})
	}
	for _, p := range c.Projects {
		ic.Projects = append(ic.Projects, identity.Project{ID: p.ID, Name: p.Name})
	}
	for _, a := range c.Assignments {
		ic.Assignments = append(ic.Assignments, identity.Assignment{User: a.User, Project: a.Project, System: a.System, Role: a.Role})
	}
	for _, e := range c.Endpoints {
		ic.Endpoints = append(ic.Endpoints, identity.Endpoint{Type: e.Type, Public: e.Public, Internal: e.Internal, Admin: e.Admin})
	}
	return ic
}
