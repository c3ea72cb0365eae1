package stack

import (
	"context"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/identity"
)

// startIdentity serves the identity API of the config's identity block,
// signing with the deployment's key (created in etcd by the first server).
func (s *Stack) startIdentity(ctx context.Context, c *configs.Identity) error {
	key, err := identity.LoadSigningKey(ctx, s.cli, s.keys)
	if err != nil {
		return err
	}
	svc, err := identity.New(identityConfig(c), key)
	if err != nil {
		return err
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
