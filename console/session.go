package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/berth-project/berth/identity"
)

// How a browser is known:
//   - sessionCookie holds the identity token a login got (keystone mode),
//     HttpOnly so no script reads it, SameSite=Strict so no other site's
//     page sends it; every request verifies it as the APIs verify
//     X-Auth-Token, so a token that expired or lost its role stops
//     working at once.
//   - csrfCookie is a random value set on the first visit (login page
//     included); a form's hidden csrf field is its HMAC, so a post
//     without the cookie's value behind it (another site's form) is
//     refused. Derived rather than stored: any API process checks it.
const (
	sessionCookie = "berth_console_session"
	csrfCookie    = "berth_console_csrf"
	cookiePath    = "/console/"
)

// caller is who is using the console.
type caller struct {
	creds identity.Credentials
	csrf  string // the token this browser's forms carry
}

type callerKey struct{}

// admin wraps a page: it needs an admin token (keystone) or nothing
// (noauth), and a CSRF cookie for the page's forms.
func (c *Console) admin(next func(http.ResponseWriter, *http.Request, *caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		csrf := c.csrfToken(w, r)
		if c.cfg.Auth == AuthNoAuth {
			next(w, r, &caller{creds: identity.Credentials{UserName: "admin", ProjectName: "admin",
				Roles: []string{identity.RoleAdmin}}, csrf: csrf})
			return
		}
		creds, ok := c.session(r)
		if !ok {
			if r.Method == http.MethodGet && r.URL.Path != "/console/events" {
				http.Redirect(w, r, "/console/login", http.StatusSeeOther)
				return
			}
			c.errorPage(w, r, nil, http.StatusUnauthorized, "Not logged in", "Log in to use the console.")
			return
		}
		cl := &caller{creds: creds, csrf: csrf}
		if !creds.HasRole(identity.RoleAdmin) {
			c.errorPage(w, r, cl, http.StatusForbidden, "Admins only",
				"The console is an operator tool: it needs a token with the admin role. "+
					"You are logged in as "+creds.UserName+" on "+scopeName(creds)+" without it.")
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, cl)), cl)
	}
}

func scopeName(c identity.Credentials) string {
	switch {
	case c.ProjectName != "":
		return "project " + c.ProjectName
	case c.System:
		return "the system"
	default:
		return "no project"
	}
}

// session verifies the session cookie's token.
func (c *Console) session(r *http.Request) (identity.Credentials, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" || c.cfg.Verifier == nil {
		return identity.Credentials{}, false
	}
	creds, err := c.cfg.Verifier.Verify(r.Context(), ck.Value)
	if err != nil {
		// Which check failed is for the log; the token never is.
		c.log.Info("console session refused", "error", err)
		return identity.Credentials{}, false
	}
	return creds, true
}

// csrfToken is the CSRF token of this browser's forms, setting its
// cookie on the first visit.
func (c *Console) csrfToken(w http.ResponseWriter, r *http.Request) string {
	ck, err := r.Cookie(csrfCookie)
	if err == nil && len(ck.Value) >= 32 {
		return deriveCSRF(ck.Value)
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	v := base64.RawURLEncoding.EncodeToString(b[:])
	http.SetCookie(w, c.cookie(r, csrfCookie, v, time.Time{}))
	return deriveCSRF(v)
}

func deriveCSRF(cookie string) string {
	m := hmac.New(sha256.New, []byte(cookie))
	m.Write([]byte("berth-console-csrf-v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF says whether a form post carries this browser's token.
func checkCSRF(r *http.Request) bool {
	ck, err := r.Cookie(csrfCookie)
	if err != nil || len(ck.Value) < 32 {
		return false
	}
	return hmac.Equal([]byte(r.PostFormValue("csrf")), []byte(deriveCSRF(ck.Value)))
}

// cookie is one of the console's cookies: HttpOnly, SameSite=Strict,
// Secure behind TLS, for the console's paths only.
func (c *Console) cookie(r *http.Request, name, value string, expires time.Time) *http.Cookie {
	ck := &http.Cookie{Name: name, Value: value, Path: cookiePath, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
	if !expires.IsZero() {
		ck.Expires = expires
	}
	return ck
}

// loginData is the login page's.
type loginData struct {
	User, Project, Error string
	Available            bool
}

func (c *Console) showLogin(w http.ResponseWriter, r *http.Request) {
	csrf := c.csrfToken(w, r)
	if c.cfg.Auth == AuthNoAuth {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "login", &caller{csrf: csrf}, 0, "Log in", loginData{Project: "admin", Available: c.cfg.Issuer != nil})
}

// login gets a token for the form's user, password and project and keeps
// it in the session cookie.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	csrf := c.csrfToken(w, r)
	if c.cfg.Auth == AuthNoAuth {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	if !checkCSRF(r) {
		c.errorPage(w, r, nil, http.StatusForbidden, "Form expired", "The form was not this browser's; reload the page and try again.")
		return
	}
	d := loginData{User: r.PostFormValue("user"), Project: r.PostFormValue("project"), Available: c.cfg.Issuer != nil}
	if c.cfg.Issuer == nil {
		d.Error = "This process has no identity service to log in with."
		c.render(w, r, http.StatusServiceUnavailable, "login", &caller{csrf: csrf}, 0, "Log in", d)
		return
	}
	tok, err := c.cfg.Issuer.Issue(identity.PasswordAuth{UserName: d.User, Password: r.PostFormValue("password"),
		Scope: identity.Scope{ProjectName: d.Project}})
	if err != nil {
		c.log.Info("console login refused", "user", d.User, "project", d.Project, "error", err)
		d.Error = "The user, password or project is wrong."
		c.render(w, r, http.StatusUnauthorized, "login", &caller{csrf: csrf}, 0, "Log in", d)
		return
	}
	c.log.Info("console login", "user", tok.Credentials.UserName, "project", tok.Credentials.ProjectName,
		"admin", tok.Credentials.HasRole(identity.RoleAdmin))
	http.SetCookie(w, c.cookie(r, sessionCookie, tok.ID, tok.ExpiresAt))
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

// logout forgets the session's token.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if !checkCSRF(r) {
		c.errorPage(w, r, nil, http.StatusForbidden, "Form expired", "The form was not this browser's; reload the page and try again.")
		return
	}
	ck := c.cookie(r, sessionCookie, "", time.Time{})
	ck.MaxAge = -1
	http.SetCookie(w, ck)
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}
