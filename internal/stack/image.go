package stack

import (
	"context"
	"errors"
	"time"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/images"
	"github.com/berth-project/berth/internal/audit"
)

// imageStore is the deployment's image store with the default images
// created (if absent): the compute API resolves imageRef through it, and
// the image API serves it. Every server that runs either ensures the
// defaults, as the compute API ensures the default flavors.
func (s *Stack) imageStore(ctx context.Context) (*images.Store, error) {
	if err := images.EnsureDefaults(ctx, s.cli, s.keys, images.Defaults(time.Now().UTC())); err != nil {
		return nil, err
	}
	return images.NewStore(s.cli, s.keys), nil
}

// startImage serves the image API of the config's image block. With auth
// = "keystone" it checks tokens with the process's identity service (the
// file's identity block and the deployment's signing key, as the compute
// API and Placement do, so it accepts every server's tokens), whether
// or not this process serves identity.
func (s *Stack) startImage(ctx context.Context, c *configs.Image) error {
	store, err := s.imageStore(ctx)
	if err != nil {
		return err
	}
	var o images.Options
	switch c.Auth {
	case configs.AuthKeystone:
		if s.cfg.Identity == nil {
			return errors.New("image API: auth = \"keystone\" checks tokens with the identity block, and the config has none")
		}
		svc, err := s.identityService(ctx)
		if err != nil {
			return err
		}
		o.Verifier, o.IdentityURI = svc.Verifier(), s.cfg.Identity.PublicURL()
		s.log.Info("image API", "auth", c.Auth)
	default:
		s.log.Warn("image API without authentication (noauth): every caller is an admin; for berth dev and tests only",
			"auth", c.Auth, "bind", c.Bind)
	}
	return s.Serve("image", c.Bind, audit.Handler("image", s.log.Named("audit"), images.NewAPI(store, s.log.Named("image"), o)))
}
