// Package identity is a Keystone v3 subset, so OpenStack clients (the
// `openstack` CLI, openstacksdk, gophercloud, Terraform) log in to Berth
// the ordinary way: a clouds.yaml with auth_url, user, password and
// project.
//
// A reader finds:
//   - directory.go: the users, projects and role assignments (from HCL,
//     decoded by package configs), with Keystone's implied roles (admin
//     implies member implies reader);
//   - password.go: bcrypt hashing, and a check that costs the same for an
//     unknown user as for a wrong password;
//   - token.go: the token itself, an HMAC-SHA256-signed compact payload
//     (user, scope, issue and expiry times, an audit id), and Service,
//     which issues and verifies tokens;
//   - signingkey.go: the signing key, created once in etcd so that every
//     `berth server` accepts every other's tokens;
//   - verifier.go: Verifier and Credentials, what the other APIs check a
//     request's X-Auth-Token with;
//   - middleware.go: RejectUnauthenticated, keystonemiddleware's 401,
//     which the compute API and Placement answer without a valid token;
//   - service_token.go: ServiceTokens, short-lived tokens of the built-in
//     berth-service principal (system scope, role service) that Berth's
//     own processes present to internal endpoints (the scheduler's
//     select_destinations), signed with the same key under another
//     domain string so a service token is never a user's and no user's
//     token, an admin's included, is a service's;
//   - httpapi.go and routes.go: the REST API (POST/GET/HEAD
//     /v3/auth/tokens, /v3/auth/catalog, the version documents), a typed
//     route table answering with Keystone's bodies and error shapes.
//
// Tokens are not stored: a token is valid while its signature checks, it
// has not expired, and its user still has a role on its scope in the
// directory (roles are looked up at each check, as Keystone's Fernet
// tokens do, so a removed assignment takes effect at once). Revoking one
// token is therefore not possible; changing the signing key revokes all.
// Since the key and the directory are fixed for a Service's life, a token
// accepted once is remembered (verified.go) and its later checks compare
// only its expiry with the clock.
package identity
