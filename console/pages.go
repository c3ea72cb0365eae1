package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
	"github.com/berth-project/berth/servers"
)

// page is what every page's layout reads.
type page struct {
	Title  string
	NoAuth bool
	User   string // "name on project", empty before login
	CSRF   string
	Rev    int64 // the revision the data was read after; 0: no live updates
	Data   any
}

// render writes the named page, or a 500 page if it cannot be rendered.
func (c *Console) render(w http.ResponseWriter, r *http.Request, code int, name string, cl *caller, rev int64, title string, data any) {
	p := page{Title: title, NoAuth: c.cfg.Auth == AuthNoAuth, Rev: rev, Data: data}
	if cl != nil {
		p.CSRF = cl.csrf
		if cl.creds.UserName != "" && !p.NoAuth {
			p.User = cl.creds.UserName + " on " + scopeName(cl.creds)
		}
	}
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, p); err != nil {
		c.log.Error("console page did not render", "page", name, "error", err)
		http.Error(w, "The page could not be rendered; see the server's log.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

type errorData struct{ Heading, Message string }

// errorPage is a page that says what went wrong, in the console's frame.
func (c *Console) errorPage(w http.ResponseWriter, r *http.Request, cl *caller, code int, heading, message string) {
	if cl == nil {
		cl = &caller{csrf: c.csrfToken(w, r)}
	}
	c.render(w, r, code, "error", cl, 0, heading, errorData{Heading: heading, Message: message})
}

// storeError is the page for a failed read or write: etcd's answer is
// logged, the page says to try again.
func (c *Console) storeError(w http.ResponseWriter, r *http.Request, cl *caller, err error) {
	c.log.Warn("console could not read or write etcd", "path", r.URL.Path, "error", err)
	c.errorPage(w, r, cl, http.StatusServiceUnavailable, "Store unavailable",
		"Berth's store did not answer in time; reload the page to try again.")
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, cl *caller) {
	ctx := r.Context()
	rev, err := c.revision(ctx)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	cells, err := c.hostRows(ctx)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	if cells, err = c.withEmptyCells(ctx, cells); err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	d := overviewData{Cells: cells}
	if err := c.serverCounts(ctx, &d); err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	for _, g := range cells {
		d.Hosts += len(g.Hosts)
		d.Up += g.Up
		d.Down += g.Down
		d.Disabled += g.Disabled
	}
	c.render(w, r, http.StatusOK, "overview", cl, rev, "Overview", d)
}

type hostData struct {
	Host    hostRow
	Servers []hosts.Server
	Note    string
	// Drain is the host's drain (nil: none); CanDrain says the console
	// has drains configured.
	Drain    *drainView
	CanDrain bool
	CanLive  bool
}

func (c *Console) hostDetail(w http.ResponseWriter, r *http.Request, cl *caller) {
	ctx := r.Context()
	name := r.PathValue("host")
	rev, err := c.revision(ctx)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	h, err := c.cfg.Hosts.Get(ctx, name)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	if h == nil {
		c.errorPage(w, r, cl, http.StatusNotFound, "No such host", "No compute host is named "+name+".")
		return
	}
	provs, err := c.cfg.Hosts.Providers(ctx, 0)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	list, err := c.cfg.Hosts.Servers(ctx, h)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	names := map[string]string{}
	for _, s := range list {
		names[s.UUID] = s.Name
	}
	dr, err := c.hostDrain(r, name, names)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	d := hostData{Host: hostRowOf(h, provs[h.Service.ProviderUUID]), Servers: list, Drain: dr, CanDrain: c.cfg.Drains != nil,
		CanLive: c.cfg.Drains != nil && c.cfg.Drains.CanLive()}
	switch r.URL.Query().Get("note") {
	case "unconfirmed":
		d.Note = "Recorded, but the host's agent did not confirm the change in time; the scheduler already sees it."
	case "done":
		d.Note = "Done."
	}
	c.render(w, r, http.StatusOK, "host", cl, rev, "Host "+name, d)
}

// maxReasonLen is Nova's disabled_reason limit (255 characters).
const maxReasonLen = 255

// setHostStatus disables (with a reason) or enables a host, as `berth
// host disable` and os-services do, then shows the host again.
func (c *Console) setHostStatus(w http.ResponseWriter, r *http.Request, cl *caller) {
	if !checkCSRF(r) {
		c.errorPage(w, r, cl, http.StatusForbidden, "Form expired", "The form was not this browser's; reload the page and try again.")
		return
	}
	name := r.PathValue("host")
	var ch hosts.Change
	disabled := false
	switch r.PostFormValue("action") {
	case "disable":
		disabled = true
		reason := strings.TrimSpace(r.PostFormValue("reason"))
		if utf8.RuneCountInString(reason) > maxReasonLen {
			c.errorPage(w, r, cl, http.StatusBadRequest, "Reason too long", "A disabled reason has at most 255 characters.")
			return
		}
		ch.DisabledReason = &reason
	case "enable":
	default:
		c.errorPage(w, r, cl, http.StatusBadRequest, "Unknown action", "The form asks for neither disable nor enable.")
		return
	}
	ch.Disabled = &disabled
	up, err := c.cfg.Hosts.Update(r.Context(), name, ch, c.cfg.TraitWait)
	switch {
	case errors.Is(err, hosts.ErrNotFound):
		c.errorPage(w, r, cl, http.StatusNotFound, "No such host", "No compute host is named "+name+".")
		return
	case err != nil:
		c.storeError(w, r, cl, err)
		return
	}
	c.log.Info("console changed a host", "host", name, "disabled", disabled, "by", cl.creds.UserName)
	note := "done"
	if up.Unconfirmed != nil {
		note = "unconfirmed"
	}
	http.Redirect(w, r, "/console/hosts/"+url.PathEscape(name)+"?note="+note, http.StatusSeeOther)
}

type serversData struct {
	Servers  []serverRow
	Status   string // the filter, "" for all
	Total    int64  // every server, of any status
	Statuses []string
	// The page: after Marker ("" the first), at most Limit; Next is the
	// following page's marker, "" on the last.
	Marker, Next string
	Limit        int
}

// statuses are the filter's choices: every status a Berth server can be
// in (etcdschema's status words).
var statuses = []string{etcdschema.StatusBuild, etcdschema.StatusActive, etcdschema.StatusVerifyResize,
	etcdschema.StatusError, etcdschema.StatusDeleted}

// Servers per page of the list: DefaultPageSize unless ?limit= says
// otherwise, at most MaxPageSize.
const (
	DefaultPageSize = 200
	MaxPageSize     = 1000
)

// serverList is one page of the servers, in id order, read through
// servers.Store.Page: the page and each live refresh read the mappings
// they walk, not every server.
func (c *Console) serverList(w http.ResponseWriter, r *http.Request, cl *caller) {
	ctx := r.Context()
	q := r.URL.Query()
	d := serversData{Statuses: slices.Clone(statuses), Status: strings.ToUpper(q.Get("status")),
		Marker: q.Get("marker"), Limit: DefaultPageSize}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			c.errorPage(w, r, cl, http.StatusBadRequest, "Bad page size", "limit is a whole number of servers, at least 1.")
			return
		}
		d.Limit = min(n, MaxPageSize)
	}
	if d.Status != "" && !slices.Contains(d.Statuses, d.Status) {
		d.Statuses = append(d.Statuses, d.Status)
	}
	rev, err := c.revision(ctx)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	var keep func(*servers.Server) bool
	if d.Status != "" {
		keep = func(v *servers.Server) bool { return serverRowOf(v).Status == d.Status }
	}
	page, next, err := c.cfg.Servers.Page(ctx, d.Marker, d.Limit, keep)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	if d.Total, err = c.serverCount(ctx); err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	d.Next = next
	for _, v := range page {
		d.Servers = append(d.Servers, serverRowOf(v))
	}
	c.render(w, r, http.StatusOK, "servers", cl, rev, "Servers", d)
}

// serverCount is how many servers there are: their instance mappings,
// counted by etcd without sending them.
func (c *Console) serverCount(ctx context.Context) (int64, error) {
	resp, err := c.cfg.Client.Get(ctx, c.cfg.Keys.InstanceMappings(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("count servers: %w", err)
	}
	return resp.Count, nil
}

type serverData struct {
	Server    serverRow
	Selection servers.Selection
	AZ        string
	// Migration is the server's move in flight or recent, nil if none.
	Migration *migrationRow
}

func (c *Console) serverDetail(w http.ResponseWriter, r *http.Request, cl *caller) {
	ctx := r.Context()
	id := r.PathValue("id")
	if _, err := uuid.Parse(id); err != nil {
		c.errorPage(w, r, cl, http.StatusNotFound, "No such server", "A server id is a UUID; "+id+" is not one.")
		return
	}
	rev, err := c.revision(ctx)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	v, err := c.cfg.Servers.Lookup(ctx, id)
	if errors.Is(err, servers.ErrNotFound) {
		c.errorPage(w, r, cl, http.StatusNotFound, "No such server", "No server has the id "+id+".")
		return
	}
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	sel, err := c.cfg.Servers.SelectionOf(ctx, v)
	if err != nil {
		c.storeError(w, r, cl, err)
		return
	}
	d := serverData{Server: serverRowOf(v), Selection: sel}
	if v.Instance != nil {
		if d.Migration, err = c.serverMigration(ctx, v.Instance.Cell, v.Instance.UUID); err != nil {
			c.storeError(w, r, cl, err)
			return
		}
	}
	if v.Instance != nil {
		d.AZ = v.Instance.AvailabilityZone
	} else {
		d.AZ = v.BuildRequest.AvailabilityZone
	}
	c.render(w, r, http.StatusOK, "server", cl, rev, "Server "+d.Server.Name, d)
}
