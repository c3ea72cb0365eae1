package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/identity"
	"github.com/berth-project/berth/internal/etcdauth"
	"github.com/berth-project/berth/internal/httpserve"
	"github.com/berth-project/berth/internal/testwait"
	"github.com/berth-project/berth/internal/tlsgen"
)

// The multi-host cluster's TLS and etcd users, made as an operator makes
// them: `berth tls ca` once, `berth tls cert` per machine (here: per
// process, each config's name, for its host's address), the templates
// rendered with the certificates' directory, and `berth etcd-auth` once
// the members are up.

// makeCA makes the deployment's lab CA and the harness's own certificate.
func (c *mhCluster) makeCA() {
	c.t.Helper()
	c.tlsDir = filepath.Join(c.dir, "tls")
	ca, err := tlsgen.WriteCA(c.tlsDir, "e2e lab CA", time.Hour)
	if err != nil {
		c.t.Fatal(err)
	}
	c.ca = ca
	if err := ca.WriteCert(c.tlsDir, "root", nil, time.Hour); err != nil {
		c.t.Fatal(err)
	}
	tc, err := httpserve.ClientConfig(filepath.Join(c.tlsDir, tlsgen.CACertFile), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: tc}
	c.net.root.Cleanup(tr.CloseIdleConnections)
	c.https = &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// cert issues name's certificate for h's address, once.
func (c *mhCluster) cert(name string, h *netHost) {
	c.t.Helper()
	if _, err := os.Stat(tlsgen.CertFile(c.tlsDir, name)); err == nil {
		return
	}
	if err := c.ca.WriteCert(c.tlsDir, name, []string{h.addr, h.name}, time.Hour); err != nil {
		c.t.Fatal(err)
	}
}

// rootTLS is the harness's etcd client TLS: the root certificate.
func (c *mhCluster) rootTLS() *tls.Config {
	c.t.Helper()
	info := transport.TLSInfo{CertFile: tlsgen.CertFile(c.tlsDir, "root"), KeyFile: tlsgen.KeyFile(c.tlsDir, "root"),
		TrustedCAFile: filepath.Join(c.tlsDir, tlsgen.CACertFile)}
	tc, err := info.ClientConfig()
	if err != nil {
		c.t.Fatal(err)
	}
	return tc
}

// etcdURL is member i's client URL (ctl-<i+1>), https as rendered.
func (c *mhCluster) etcdURL(i int) string {
	return "https://" + c.hosts[fmt.Sprintf("ctl-%d", i+1)].addr + ":2379"
}

// apiClient is a client of the compute API on h, over TLS, with the
// rendered admin's token (logged in once, at any running server's
// identity API): /v1 checks tokens as Nova's API does.
func (c *mhCluster) apiClient(h *netHost) *api.Client {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.adminToken == "" {
		var errs []string
		for _, p := range c.servers {
			if !p.running() {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			tok, err := identity.Login(ctx, c.https, "https://"+p.host.addr+":5000/v3", "admin", e2eAdminPassword, "admin")
			cancel()
			if err == nil {
				c.adminToken = tok
				break
			}
			errs = append(errs, err.Error())
		}
		if c.adminToken == "" {
			c.t.Fatalf("no server's identity API gave the admin a token: %v", errs)
		}
	}
	cl := api.NewClient("https://" + h.addr + ":8774")
	cl.HTTP = c.https
	cl.Token = c.adminToken
	return cl
}

// waitAPI waits until the compute API on h answers over TLS.
func (c *mhCluster) waitAPI(h *netHost) {
	c.t.Helper()
	url := "https://" + h.addr + ":8774/healthz"
	testwait.Poll(c.t, 60*time.Second, url+" to answer", func() (bool, string) {
		resp, err := c.https.Get(url)
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode < 500, resp.Status
	})
}

// enableEtcdAuth gives every machine of the layout its etcd user and
// turns auth on, as `berth etcd-auth` does: the servers, the conductors
// of cell1 and cell2, the six agents and the members. From then on each
// process may write only what its role does; a conductor or an agent
// started later (a new cell, a new host) is added to the plan and the
// plan applied again before it starts, as an operator re-runs berth
// etcd-auth (authorize).
func (c *mhCluster) enableEtcdAuth() {
	c.t.Helper()
	c.auth = etcdauth.Machines{Servers: []string{"server-1", "server-2"},
		Conductors: map[string]string{"conductor-1": "cell1", "conductor-2": "cell2"}, Members: c.etcdNames}
	for i := 1; i <= 6; i++ {
		host, cell := fmt.Sprintf("compute-%d", i), "cell1"
		if i > 3 {
			cell = "cell2"
		}
		c.auth.Agents = append(c.auth.Agents, etcdauth.Host{Name: host, Cell: cell, ProviderUUID: agent.ProviderUUIDForHost(host)})
	}
	c.applyAuth()
}

// authorize adds a conductor (cell != "" and not an agent) or an agent
// to the etcd users' plan, applying it again when it is new.
func (c *mhCluster) authorize(name, cell string, isAgent bool) {
	c.t.Helper()
	if isAgent {
		for _, h := range c.auth.Agents {
			if h.Name == name {
				return
			}
		}
		c.auth.Agents = append(c.auth.Agents, etcdauth.Host{Name: name, Cell: cell, ProviderUUID: agent.ProviderUUIDForHost(name)})
	} else {
		if c.auth.Conductors[name] == cell {
			return
		}
		c.auth.Conductors[name] = cell
	}
	c.applyAuth()
}

func (c *mhCluster) applyAuth() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	roles, users := etcdauth.Plan(c.keys, c.auth)
	if err := etcdauth.Apply(ctx, c.cli, roles, users, ""); err != nil {
		c.t.Fatalf("apply the etcd users: %v", err)
	}
}
