package identity

import (
	"context"
	"slices"
)

// Verifier is what an API checks a request's X-Auth-Token with. *Service
// is one; a test may give an API a fake.
type Verifier interface {
	// Verify returns the token's credentials, or an error wrapping
	// ErrInvalidToken (bad signature, expired, user or role gone).
	Verify(ctx context.Context, token string) (Credentials, error)
}

var _ Verifier = serviceVerifier{}

// Credentials are who a token stands for and what it may do: policy
// checks read them (Nova's "project_reader_or_admin" is HasRole("reader")
// with ProjectID equal to the resource's owner, or HasRole("admin")).
type Credentials struct {
	UserID, UserName       string
	ProjectID, ProjectName string // empty unless project-scoped
	System                 bool   // system-scoped ({"system": {"all": true}})
	// Roles held on the scope, implied ones included (an admin is also
	// member and reader), strongest first; empty for an unscoped token.
	Roles []string
}

// HasRole says whether the credentials hold role on their scope.
func (c Credentials) HasRole(role string) bool { return slices.Contains(c.Roles, role) }

// Verifier is the service as the other APIs' token check (Service.Verify
// returns the whole Token, which the identity API itself needs).
func (s *Service) Verifier() Verifier { return serviceVerifier{s} }

type serviceVerifier struct{ s *Service }

func (v serviceVerifier) Verify(_ context.Context, token string) (Credentials, error) {
	t, err := v.s.Verify(token)
	if err != nil {
		return Credentials{}, err
	}
	return t.Credentials, nil
}
