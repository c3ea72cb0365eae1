package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/berth-project/berth/internal/httpserve"
)

// API is the Keystone v3 subset over a Service, an http.Handler.
type API struct {
	svc *Service
	log hclog.Logger
	mux *http.ServeMux
}

// NewAPI serves svc's REST API.
func NewAPI(svc *Service, log hclog.Logger) *API {
	a := &API{svc: svc, log: log, mux: http.NewServeMux()}
	byPath := map[string][]route{}
	var order []string
	for _, rt := range a.routes() {
		if byPath[rt.path] == nil {
			order = append(order, rt.path)
		}
		byPath[rt.path] = append(byPath[rt.path], rt)
	}
	for _, path := range order {
		rts := byPath[path]
		pattern := path
		if strings.HasSuffix(path, "/") {
			pattern += "{$}" // a pattern ending in "/" would match the subtree
		}
		a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { a.serve(w, r, rts) })
	}
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "The resource could not be found.")
	})
	return a
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// serve runs the row of rts for r's method: 405 without one, then the
// token check of withToken rows, then the handler.
func (a *API) serve(w http.ResponseWriter, r *http.Request, rts []route) {
	var rt *route
	var allow []string
	for i := range rts {
		allow = append(allow, rts[i].method)
		if rts[i].method == r.Method {
			rt = &rts[i]
		}
	}
	if rt == nil {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		writeError(w, http.StatusMethodNotAllowed, "The method is not allowed for the requested URL.")
		return
	}
	var auth *Token
	if rt.withToken {
		t, err := a.svc.Verify(r.Header.Get("X-Auth-Token"))
		if err != nil {
			a.log.Debug("X-Auth-Token refused", "path", r.URL.Path, "error", err)
			a.unauthorized(w, r)
			return
		}
		auth = &t
	}
	if err := rt.handle(w, r, auth); err != nil {
		var he *httpError
		if errors.As(err, &he) {
			if he.code == http.StatusUnauthorized {
				a.log.Info("authentication refused", "path", r.URL.Path, "error", he.cause)
				a.unauthorized(w, r)
				return
			}
			writeError(w, he.code, he.msg)
			return
		}
		a.log.Error("request failed", "path", r.URL.Path, "error", err)
		writeError(w, http.StatusInternalServerError, "An unexpected error prevented the server from fulfilling your request.")
	}
}

// unauthorized is Keystone's 401: one message whatever failed, and the
// WWW-Authenticate header naming where to log in.
func (a *API) unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf("Keystone uri=%q", baseURL(r)))
	writeError(w, http.StatusUnauthorized, "The request you have made requires authentication.")
}

// maxBodyBytes bounds a request body: a password login is a few hundred
// bytes (Keystone's own bound, max_request_body_size, is 112 KiB).
const maxBodyBytes = 64 << 10

// httpError is a handler's answer other than 2xx; cause is for the log.
type httpError struct {
	code  int
	msg   string
	cause error
}

func (e *httpError) Error() string { return fmt.Sprintf("%d %s: %v", e.code, e.msg, e.cause) }

func badRequest(format string, args ...any) error {
	return &httpError{code: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// keystoneTitles are the titles Keystone's errors carry.
var keystoneTitles = map[int]string{
	http.StatusBadRequest:            "Bad Request",
	http.StatusUnauthorized:          "Unauthorized",
	http.StatusForbidden:             "Forbidden",
	http.StatusNotFound:              "Not Found",
	http.StatusMethodNotAllowed:      "Method Not Allowed",
	http.StatusRequestEntityTooLarge: "Request Entity Too Large",
	http.StatusInternalServerError:   "Internal Server Error",
}

// writeError writes Keystone's error body:
// {"error": {"code": 401, "message": "...", "title": "Unauthorized"}}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"code": code, "message": msg, "title": keystoneTitles[code]}})
}

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Vary", "X-Auth-Token")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // Keystone writes <, > and & plainly
	_ = enc.Encode(body)
}

// baseURL is how the client reached this server: the version documents'
// links are made from it, as Keystone's are when no public_endpoint is
// configured.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// ---- version documents --------------------------------------------------

// Keystone 22 (Zed) serves identity API v3.14.
func (a *API) versionDoc(r *http.Request) map[string]any {
	return map[string]any{
		"id": "v3.14", "status": "stable", "updated": "2020-04-07T00:00:00Z",
		"links":       []map[string]string{{"rel": "self", "href": baseURL(r) + "/v3/"}},
		"media-types": []map[string]string{{"base": "application/json", "type": "application/vnd.openstack.identity-v3+json"}},
	}
}

// versions is GET /: Keystone answers 300 Multiple Choices with every
// version it serves, v3 alone.
func (a *API) versions(w http.ResponseWriter, r *http.Request, _ *Token) error {
	writeJSON(w, http.StatusMultipleChoices, map[string]any{"versions": map[string]any{"values": []any{a.versionDoc(r)}}})
	return nil
}

// version is GET /v3, where keystoneauth discovers an auth_url ending in /v3.
func (a *API) version(w http.ResponseWriter, r *http.Request, _ *Token) error {
	writeJSON(w, http.StatusOK, map[string]any{"version": a.versionDoc(r)})
	return nil
}

// ---- tokens ---------------------------------------------------------------

// authRequest is the body of POST /v3/auth/tokens, the parts Berth reads.
type authRequest struct {
	Auth *struct {
		Identity *struct {
			Methods  []string `json:"methods"`
			Password *struct {
				User *struct {
					ID       string     `json:"id"`
					Name     string     `json:"name"`
					Password *string    `json:"password"`
					Domain   *domainRef `json:"domain"`
				} `json:"user"`
			} `json:"password"`
		} `json:"identity"`
		Scope *struct {
			Project *struct {
				ID     string     `json:"id"`
				Name   string     `json:"name"`
				Domain *domainRef `json:"domain"`
			} `json:"project"`
			System *struct {
				All bool `json:"all"`
			} `json:"system"`
			Domain *domainRef `json:"domain"`
		} `json:"scope"`
	} `json:"auth"`
}

// noSuchName stands for a user or project named in a domain other than
// the default one: no config holds it (configs refuses control
// characters in names), so the login fails as for an unknown name.
const noSuchName = "\x00"

type domainRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// isDefault says whether d names the default domain (nil: not named).
func (d *domainRef) isDefault() bool {
	return d == nil || d.ID == DefaultDomainID || (d.ID == "" && d.Name == DefaultDomainName)
}

// issueToken is POST /v3/auth/tokens: 201 with the token in
// X-Subject-Token and its body, or Keystone's 401.
func (a *API) issueToken(w http.ResponseWriter, r *http.Request, _ *Token) error {
	var req authRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(&req); err != nil {
		if _, tooLarge := httpserve.BodyTooLarge(err); tooLarge {
			// Keystone's RequestTooLarge, from its sizelimit middleware.
			return &httpError{code: http.StatusRequestEntityTooLarge, msg: "Request is too large.", cause: err}
		}
		return badRequest("Malformed request body: %v", err)
	}
	pa, err := passwordAuth(&req)
	if err != nil {
		return err
	}
	t, err := a.svc.Issue(pa)
	if err != nil {
		if errors.Is(err, ErrUnauthorized) {
			return &httpError{code: http.StatusUnauthorized, cause: err}
		}
		return err
	}
	w.Header().Set("X-Subject-Token", t.ID)
	writeJSON(w, http.StatusCreated, map[string]any{"token": a.tokenBody(r, t, !noCatalog(r))})
	a.log.Debug("token issued", "user", t.Credentials.UserName, "project", t.Credentials.ProjectName,
		"system", t.Credentials.System, "audit_id", t.AuditID)
	return nil
}

// passwordAuth checks the request's shape as Keystone's JSON schema
// does, with its words where they matter to a user.
func passwordAuth(req *authRequest) (PasswordAuth, error) {
	if req.Auth == nil || req.Auth.Identity == nil {
		return PasswordAuth{}, badRequest("Invalid input for field 'auth': 'identity' is a required property")
	}
	id := req.Auth.Identity
	if len(id.Methods) != 1 || id.Methods[0] != "password" {
		return PasswordAuth{}, &httpError{code: http.StatusUnauthorized,
			cause: fmt.Errorf("%w: methods %v, only password is served", ErrUnauthorized, id.Methods)}
	}
	if id.Password == nil || id.Password.User == nil {
		return PasswordAuth{}, badRequest("Invalid input for field 'identity/password': 'user' is a required property")
	}
	u := id.Password.User
	if u.ID == "" && u.Name == "" {
		return PasswordAuth{}, badRequest("Expecting to find id or name in user - the server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.")
	}
	if u.ID == "" && u.Domain == nil {
		return PasswordAuth{}, badRequest("Expecting to find domain in user. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.")
	}
	if u.Password == nil {
		return PasswordAuth{}, badRequest("Invalid input for field 'identity/password/user': 'password' is a required property")
	}
	pa := PasswordAuth{UserID: u.ID, UserName: u.Name, Password: *u.Password}
	if u.ID == "" && !u.Domain.isDefault() {
		// Berth has the default domain only: a user of another is unknown.
		pa.UserName = noSuchName
	}
	if sc := req.Auth.Scope; sc != nil {
		switch {
		case sc.System != nil:
			if !sc.System.All {
				return PasswordAuth{}, badRequest("Invalid input for field 'scope/system': 'all' must be true")
			}
			pa.Scope.System = true
		case sc.Project != nil:
			p := sc.Project
			if p.ID == "" && p.Name == "" {
				return PasswordAuth{}, badRequest("Expecting to find id or name in project - the server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.")
			}
			if p.ID == "" && p.Domain == nil {
				return PasswordAuth{}, badRequest("Expecting to find domain in project. The server could not comply with the request since it is either malformed or otherwise incorrect. The client is assumed to be in error.")
			}
			pa.Scope.ProjectID, pa.Scope.ProjectName = p.ID, p.Name
			if p.ID == "" && !p.Domain.isDefault() {
				pa.Scope.ProjectName = noSuchName
			}
		case sc.Domain != nil:
			return PasswordAuth{}, &httpError{code: http.StatusUnauthorized,
				cause: fmt.Errorf("%w: domain scope is not served", ErrUnauthorized)}
		}
	}
	return pa, nil
}

// validateToken is GET and HEAD /v3/auth/tokens: X-Subject-Token's body,
// 404 when it is not valid, then the policy (mayCheckToken).
func (a *API) validateToken(w http.ResponseWriter, r *http.Request, auth *Token) error {
	subject := r.Header.Get("X-Subject-Token")
	t, err := a.svc.Verify(subject)
	if err != nil {
		a.log.Debug("X-Subject-Token invalid", "error", err)
		return &httpError{code: http.StatusNotFound, msg: "Could not find token: " + subject, cause: err}
	}
	if !mayCheckToken(auth.Credentials, t.Credentials, r.Method) {
		rule := "identity:validate_token"
		if r.Method == http.MethodHead {
			rule = "identity:check_token"
		}
		return &httpError{code: http.StatusForbidden,
			msg: "You are not authorized to perform the requested action: " + rule + "."}
	}
	w.Header().Set("X-Subject-Token", t.ID)
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"token": a.tokenBody(r, t, !noCatalog(r))})
	return nil
}

// mayCheckToken is Keystone's identity:validate_token (GET) and
// identity:check_token (HEAD) with their deprecated rules OR'ed in, as
// they are while enforce_new_defaults is off: the token's own user
// (rule:token_subject), a system reader, and the deprecated
// admin_or_token_subject's role:admin on any scope; GET also lets the
// service role in (service_admin_or_token_subject). An admin scoped to
// a project may so check anyone's token, as in Keystone.
func mayCheckToken(caller, subject Credentials, method string) bool {
	switch {
	case caller.UserID == subject.UserID, caller.HasRole(RoleAdmin), caller.System && caller.HasRole(RoleReader):
		return true
	}
	return method == http.MethodGet && caller.HasRole(RoleService)
}

// getCatalog is GET /v3/auth/catalog: the catalog of X-Auth-Token's
// scope (Keystone refuses an unscoped token: it has no catalog).
func (a *API) getCatalog(w http.ResponseWriter, r *http.Request, auth *Token) error {
	c := auth.Credentials
	if c.ProjectID == "" && !c.System {
		return &httpError{code: http.StatusForbidden,
			msg: "You are not authorized to perform the requested action: A project-scoped token is required to produce a service catalog."}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"catalog": a.catalog(r),
		"links":   map[string]any{"self": baseURL(r) + "/v3/auth/catalog", "previous": nil, "next": nil},
	})
	return nil
}

// noCatalog is Keystone's ?nocatalog query parameter (any value).
func noCatalog(r *http.Request) bool {
	_, ok := r.URL.Query()["nocatalog"]
	return ok
}

// keystoneTime is Keystone's timestamp format, microseconds and a Z.
func keystoneTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

var defaultDomain = map[string]string{"id": DefaultDomainID, "name": DefaultDomainName}

// tokenBody is the "token" object Keystone answers with.
func (a *API) tokenBody(r *http.Request, t Token, withCatalog bool) map[string]any {
	c := t.Credentials
	body := map[string]any{
		"methods":    []string{"password"},
		"user":       map[string]any{"id": c.UserID, "name": c.UserName, "domain": defaultDomain, "password_expires_at": nil},
		"audit_ids":  []string{t.AuditID},
		"expires_at": keystoneTime(t.ExpiresAt),
		"issued_at":  keystoneTime(t.IssuedAt),
	}
	if c.ProjectID == "" && !c.System {
		return body // unscoped: no roles, no catalog
	}
	roles := make([]map[string]string, 0, len(c.Roles))
	for _, r := range c.Roles {
		roles = append(roles, map[string]string{"id": roleID(r), "name": r})
	}
	body["roles"] = roles
	if c.System {
		body["system"] = map[string]bool{"all": true}
	} else {
		body["project"] = map[string]any{"id": c.ProjectID, "name": c.ProjectName, "domain": defaultDomain}
		body["is_domain"] = false
	}
	if withCatalog {
		body["catalog"] = a.catalog(r)
	}
	return body
}

// serviceNames are the names Keystone catalogs give each service type.
var serviceNames = map[string]string{"compute": "nova", "placement": "placement", "image": "glance", "identity": "keystone"}

// catalog is the service catalog: each endpoint's three interfaces in
// the region. Without an identity endpoint in the config, the identity
// service is where the client reached this API (r's base URL): a
// client's identity commands find it there, as it logged in.
func (a *API) catalog(r *http.Request) []map[string]any {
	endpoints := a.svc.catalog
	if !slices.ContainsFunc(endpoints, func(e Endpoint) bool { return e.Type == "identity" }) {
		self := baseURL(r) + "/v3"
		endpoints = append(slices.Clip(endpoints), Endpoint{Type: "identity", Public: self, Internal: self, Admin: self})
	}
	out := make([]map[string]any, 0, len(endpoints))
	for _, e := range endpoints {
		var eps []map[string]string
		for _, iface := range []struct{ name, url string }{{"public", e.Public}, {"internal", e.Internal}, {"admin", e.Admin}} {
			if iface.url == "" {
				continue
			}
			eps = append(eps, map[string]string{
				"id": DerivedID("endpoint", e.Type+"/"+iface.name), "interface": iface.name,
				"region": a.svc.region, "region_id": a.svc.region, "url": iface.url,
			})
		}
		name := serviceNames[e.Type]
		if name == "" {
			name = e.Type
		}
		out = append(out, map[string]any{"id": DerivedID("service", e.Type), "type": e.Type, "name": name, "endpoints": eps})
	}
	return out
}
