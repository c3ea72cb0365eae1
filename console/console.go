package console

import (
	"context"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/drain"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/metrics"
	"github.com/berth-project/berth/servers"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Auth modes, the compute API's words (configs.AuthKeystone, AuthNoAuth).
const (
	AuthKeystone = "keystone"
	AuthNoAuth   = "noauth"
)

// Issuer gets a token for a password login; *identity.Service is one.
type Issuer interface {
	Issue(identity.PasswordAuth) (identity.Token, error)
}

// Config is what the console reads and changes, and how it checks who
// calls.
type Config struct {
	Client  *clientv3.Client
	Keys    etcdschema.Keys
	Hosts   *hosts.Store
	Servers *servers.Store
	// Drains starts, shows and cancels host drains (nil: the host page
	// has no drain form).
	Drains *drain.Store
	// Auth is AuthKeystone or AuthNoAuth (anything else is keystone: the
	// console never opens by mistake).
	Auth string
	// Verifier checks the session's token, Issuer logs in; both needed
	// with AuthKeystone.
	Verifier identity.Verifier
	Issuer   Issuer
	// MaxStreams bounds the live-update streams served at once (0: 32).
	MaxStreams int
	// TraitWait bounds a disable's wait for the agent's confirmation
	// (0: hosts.DefaultTraitSyncTimeout).
	TraitWait time.Duration
	Log       hclog.Logger
}

// Console is the web console's handler.
type Console struct {
	cfg     Config
	log     hclog.Logger
	mux     *http.ServeMux
	pages   map[string]*template.Template
	streams chan struct{} // one token per live stream
}

// DefaultMaxStreams is the live streams a process serves at once when
// Config.MaxStreams is 0: each holds an etcd watch and a connection.
const DefaultMaxStreams = 32

// New is the console over cfg.
func New(cfg Config) *Console {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = DefaultMaxStreams
	}
	if cfg.TraitWait <= 0 {
		cfg.TraitWait = hosts.DefaultTraitSyncTimeout
	}
	if cfg.Auth != AuthNoAuth {
		cfg.Auth = AuthKeystone
	}
	c := &Console{cfg: cfg, log: cfg.Log, streams: make(chan struct{}, cfg.MaxStreams)}
	c.pages = parsePages()
	c.routes()
	return c
}

// pageQuery is the servers list's query for a page: the filter, the
// marker and the page size (the default left out).
func pageQuery(status, marker string, limit int) template.URL {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if marker != "" {
		q.Set("marker", marker)
	}
	if limit != DefaultPageSize {
		q.Set("limit", strconv.Itoa(limit))
	}
	return template.URL(q.Encode())
}

// parsePages parses each page with the shared layout and partials.
func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"ago":       ago,
		"inc":       func(i int) int { return i + 1 },
		"pageQuery": pageQuery,
	}
	out := map[string]*template.Template{}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		if n == "templates/layout.html" || n == "templates/partials.html" {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		out[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", n))
	}
	return out
}

// routes are the console's pages, its form posts and its event stream.
func (c *Console) routes() {
	m := http.NewServeMux()
	// handle labels the request's metrics with its route pattern.
	handle := func(pattern string, h http.HandlerFunc) {
		m.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			metrics.SetRoute(r, r.Pattern)
			h(w, r)
		})
	}
	static, _ := fs.Sub(staticFS, "static")
	handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)).ServeHTTP)
	handle("GET /console/login", c.showLogin)
	handle("POST /console/login", c.login)
	handle("POST /console/logout", c.logout)
	handle("GET /console/{$}", c.admin(c.overview))
	handle("GET /console/hosts/{host}", c.admin(c.hostDetail))
	handle("POST /console/hosts/{host}/status", c.admin(c.setHostStatus))
	handle("POST /console/hosts/{host}/drain", c.admin(c.drainHost))
	handle("GET /console/servers", c.admin(c.serverList))
	handle("GET /console/servers/{id}", c.admin(c.serverDetail))
	handle("GET /console/migrations", c.admin(c.migrationList))
	handle("GET /console/events", c.admin(c.events))
	handle("/console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusMovedPermanently)
	})
	c.mux = m
}

// ServeHTTP serves the console's paths, with headers that keep its pages
// out of frames and scripts other than its own out of its pages.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	c.mux.ServeHTTP(w, r)
}

// Beside serves the console's paths (/console and below) and hands every
// other path to next, unchanged.
func (c *Console) Beside(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "/console" || strings.HasPrefix(p, "/console/") {
			c.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// revision is etcd's current revision, read before a page's data: a
// change after it reaches the page's live stream, which starts there.
func (c *Console) revision(ctx context.Context) (int64, error) {
	resp, err := c.cfg.Client.Get(ctx, c.cfg.Keys.Cell("health-check"), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}

// ago is a duration since t for people: "12s ago", "3m ago".
func ago(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String() + " ago"
	case d < time.Hour:
		return d.Round(time.Minute).String() + " ago"
	default:
		return d.Round(time.Hour).String() + " ago"
	}
}
