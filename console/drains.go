package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/drain"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/hosts"
)

// A host's drain on its page: the drain's state, counts and servers
// (live: the drain record is under a prefix the event stream follows),
// and a form to start one or cancel it, behind the same login and CSRF
// check as the disable form. The moving is the scheduler leader's
// (package drain); the console only starts, shows and cancels.

// drainView is a drain as the host page shows it.
type drainView struct {
	State, Error string
	Live         bool
	Parallel     int
	Deadline     *time.Time
	Counts       map[string]int
	Servers      []drainServer
	RequestedAgo string
}

type drainServer struct {
	UUID, Name, State, Migration, DestHost, Reason string
}

// Draining says the drain still starts moves (the form offers cancel).
func (d *drainView) Draining() bool { return d.State == etcdschema.DrainDraining }

// hostDrain reads host's drain for its page, nil when it has none or the
// console has no drains configured. names are the host's servers' names.
func (c *Console) hostDrain(r *http.Request, host string, names map[string]string) (*drainView, error) {
	if c.cfg.Drains == nil {
		return nil, nil
	}
	d, err := c.cfg.Drains.Get(r.Context(), host)
	if errors.Is(err, drain.ErrNoDrain) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := c.nameDrained(r, d, names); err != nil {
		return nil, err
	}
	v := &drainView{State: d.State, Error: d.Error, Live: d.Live, Parallel: d.Parallel, Deadline: d.Deadline,
		Counts: d.Counts(), RequestedAgo: ago(d.RequestedAt)}
	for _, s := range d.Instances {
		v.Servers = append(v.Servers, drainServer{UUID: s.UUID, Name: names[s.UUID], State: s.State,
			Migration: s.MigrationUUID, DestHost: s.DestHost, Reason: s.Reason})
	}
	return v, nil
}

// nameDrained adds to names the drain's servers no longer on the host,
// read from their cells' instance records in read transactions (etcd's
// 128 operations each at most); a server gone is left to its uuid.
func (c *Console) nameDrained(r *http.Request, d *etcdschema.HostDrain, names map[string]string) error {
	var keys []string
	for _, s := range d.Instances {
		if names[s.UUID] == "" && s.Cell != "" {
			keys = append(keys, c.cfg.Keys.CellInstance(s.Cell, s.UUID))
		}
	}
	for start := 0; start < len(keys); start += 100 {
		part := keys[start:min(start+100, len(keys))]
		ops := make([]clientv3.Op, len(part))
		for i, k := range part {
			ops[i] = clientv3.OpGet(k)
		}
		resp, err := c.cfg.Client.Txn(r.Context()).Then(ops...).Commit()
		if err != nil {
			return fmt.Errorf("read the drained servers' names: %w", err)
		}
		for _, rr := range resp.Responses {
			for _, kv := range rr.GetResponseRange().Kvs {
				var in etcdschema.Instance
				if etcdschema.Decode(string(kv.Key), kv.Value, &in) == nil {
					names[in.UUID] = in.Name
				}
			}
		}
	}
	return nil
}

// drainHost starts (action "start", with parallel and a deadline such as
// "30m") or cancels (action "cancel") host's drain, then shows the host
// again.
func (c *Console) drainHost(w http.ResponseWriter, r *http.Request, cl *caller) {
	if !checkCSRF(r) {
		c.errorPage(w, r, cl, http.StatusForbidden, "Form expired", "The form was not this browser's; reload the page and try again.")
		return
	}
	if c.cfg.Drains == nil {
		c.errorPage(w, r, cl, http.StatusNotFound, "No drains here", "This console was started without host drains.")
		return
	}
	name := r.PathValue("host")
	note := "done"
	var err error
	switch r.PostFormValue("action") {
	case "start":
		req, bad := drainRequestOf(r)
		if bad != "" {
			c.errorPage(w, r, cl, http.StatusBadRequest, "Cannot drain "+name, bad)
			return
		}
		var st *drain.Started
		st, err = c.cfg.Drains.Start(r.Context(), name, req, c.cfg.TraitWait)
		if err == nil && st.Unconfirmed != nil {
			note = "unconfirmed"
		}
	case "cancel":
		_, err = c.cfg.Drains.Cancel(r.Context(), name)
	default:
		c.errorPage(w, r, cl, http.StatusBadRequest, "Unknown action", "The form asks for neither start nor cancel.")
		return
	}
	switch {
	case errors.Is(err, hosts.ErrNotFound):
		c.errorPage(w, r, cl, http.StatusNotFound, "No such host", "No compute host is named "+name+".")
		return
	case errors.Is(err, drain.ErrAlreadyDraining), errors.Is(err, drain.ErrNotDraining), errors.Is(err, drain.ErrNoDrain):
		c.errorPage(w, r, cl, http.StatusConflict, "Cannot "+r.PostFormValue("action")+" the drain of "+name, err.Error()+".")
		return
	case errors.Is(err, drain.ErrLiveUnavailable):
		c.errorPage(w, r, cl, http.StatusBadRequest, "Cannot drain "+name, err.Error()+".")
		return
	case err != nil:
		c.storeError(w, r, cl, err)
		return
	}
	c.log.Info("console drain", "host", name, "action", r.PostFormValue("action"), "by", cl.creds.UserName)
	http.Redirect(w, r, "/console/hosts/"+url.PathEscape(name)+"?note="+note, http.StatusSeeOther)
}

// drainRequestOf reads the start form; bad says what is wrong with it.
func drainRequestOf(r *http.Request) (req drain.Request, bad string) {
	req.Live = r.PostFormValue("live") == "on"
	if p := strings.TrimSpace(r.PostFormValue("parallel")); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return req, "Moves at once must be a whole number, not " + strconv.Quote(p) + "."
		}
		req.Parallel = n
	}
	if d := strings.TrimSpace(r.PostFormValue("deadline")); d != "" {
		dur, err := time.ParseDuration(d)
		if err != nil || dur <= 0 {
			return req, "The deadline must be a duration such as 90m or 2h, not " + strconv.Quote(d) + "."
		}
		req.Deadline = dur
	}
	if err := req.Validate(); err != nil {
		return req, err.Error() + "."
	}
	return req, ""
}
