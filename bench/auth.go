package bench

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/identity"
)

// benchIdentity turns keystone auth on in the Berth the tool starts, as
// a deployment has it: an identity block with one user, a member of
// project "bench" (Nova's policy lets a member create and delete its
// project's servers and groups), whose password is made for this run,
// and the compute API checking tokens. It returns the user's login; the
// AuthURL is known once the identity API listens.
func benchIdentity(cfg *configs.Config, admin bool) (*Credentials, error) {
	pw := make([]byte, 18)
	if _, err := rand.Read(pw); err != nil {
		return nil, err
	}
	password := hex.EncodeToString(pw)
	// bcrypt's minimum cost: the password lives for one run on loopback,
	// and the login is once per run, not per request.
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	if cfg.Identity == nil {
		cfg.Identity = &configs.Identity{TokenTTL: time.Hour, Region: "RegionOne"}
	}
	cfg.Identity.Bind = "127.0.0.1:0"
	cfg.Identity.Users = append(cfg.Identity.Users, configs.IdentityUser{Name: "bench", PasswordHash: string(hash)})
	cfg.Identity.Projects = append(cfg.Identity.Projects, configs.IdentityProject{Name: "bench"})
	role := identity.RoleMember
	if admin {
		role = identity.RoleAdmin
	}
	cfg.Identity.Assignments = append(cfg.Identity.Assignments,
		configs.RoleAssignment{User: "bench", Project: "bench", Role: role})
	cfg.API.Auth = configs.AuthKeystone
	return &Credentials{User: "bench", Password: password, Project: "bench"}, nil
}

// credentialsFromEnv is the login for an existing Berth in keystone mode,
// from the variables an openrc file sets.
func credentialsFromEnv() (*Credentials, error) {
	c := &Credentials{AuthURL: os.Getenv("OS_AUTH_URL"), User: os.Getenv("OS_USERNAME"),
		Password: os.Getenv("OS_PASSWORD"), Project: os.Getenv("OS_PROJECT_NAME")}
	if c.AuthURL == "" || c.User == "" || c.Password == "" || c.Project == "" {
		return nil, errors.New("an existing Berth in keystone mode needs OS_AUTH_URL, OS_USERNAME, OS_PASSWORD and OS_PROJECT_NAME (or -noauth)")
	}
	return c, nil
}
