package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// checkInvariants fails the test with every invariant that does not hold,
// saying what and where. It is run at the end of every scenario, once the
// servers asked for have settled:
//   - no provider over capacity: usage <= (total-reserved)*ratio, per class;
//   - every server asked for (and every server the API lists) is ACTIVE,
//     or ERROR with a fault message;
//   - no allocation without an instance: every consumer is an instance
//     that is ACTIVE or BUILD, and an ACTIVE one's allocation is on its
//     host's provider only;
//   - no instance without an allocation: every ACTIVE or BUILD instance on
//     a host has one;
//   - no instance reported by a host it is not on (/hosts/<h>/instances/);
//   - the moves' (moveInvariants): at rest, every migration final with
//     no consumer or mapping left, and each provider's usage the sum of
//     its consumers' allocations and of the flavors of its instances;
//   - the etcd members agree: one cluster id, one leader, and the same
//     keys and values (HashKV) at one revision.
func (c *mhCluster) checkInvariants(scenario string) {
	c.t.Helper()
	start := time.Now()
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Servers, through the API.
	list, err := c.api().ListAllServers(ctx)
	if err != nil {
		c.t.Fatalf("%s: invariants: list servers: %v", scenario, err)
	}
	listed := map[string]bool{}
	for _, s := range list {
		listed[s.ID] = true
		switch {
		case s.Status == "ACTIVE":
		case s.Status == "ERROR" && s.Fault != nil && s.Fault.Message != "":
		case s.Status == "ERROR":
			fail("server %s (%s) is ERROR without a fault message", s.ID, s.Name)
		default:
			fail("server %s (%s) is %s/%s, not ACTIVE or ERROR", s.ID, s.Name, s.Status, s.TaskState)
		}
	}
	c.mu.Lock()
	for id, burst := range c.requested {
		if !listed[id] {
			fail("server %s asked for in %s is not listed by the API", id, burst)
		}
	}
	requested := len(c.requested)
	c.mu.Unlock()

	// Everything else straight from etcd, at one revision.
	all, err := c.cli.Get(ctx, c.keys.All(), clientv3.WithPrefix())
	if err != nil {
		c.t.Fatalf("%s: invariants: read etcd: %v", scenario, err)
	}
	rev := all.Header.Revision
	providers := map[string]etcdschema.Provider{}
	consumers := map[string]etcdschema.Consumer{}
	instances := map[string]etcdschema.Instance{}
	type hostInst struct{ host, uuid string }
	var reported []hostInst
	for _, kv := range all.Kvs {
		key := string(kv.Key)
		switch {
		case strings.HasPrefix(key, c.keys.Providers()):
			var p etcdschema.Provider
			if err := etcdschema.Decode(key, kv.Value, &p); err != nil {
				fail("%v", err)
				continue
			}
			providers[p.UUID] = p
		case strings.HasPrefix(key, c.keys.Consumers()):
			var con etcdschema.Consumer
			if err := etcdschema.Decode(key, kv.Value, &con); err != nil {
				fail("%v", err)
				continue
			}
			consumers[con.UUID] = con
		case strings.HasPrefix(key, c.keys.CellsPrefix()) && strings.Contains(key, "/instances/"):
			var in etcdschema.Instance
			if err := etcdschema.Decode(key, kv.Value, &in); err != nil {
				fail("%v", err)
				continue
			}
			if prev, dup := instances[in.UUID]; dup {
				fail("instance %s has records in two cells (%s and %s)", in.UUID, prev.Cell, in.Cell)
			}
			instances[in.UUID] = in
		case strings.HasPrefix(key, c.keys.HostsPrefix()) && strings.Contains(key, "/instances/"):
			rest := strings.TrimPrefix(key, c.keys.HostsPrefix())
			host, uuid, _ := strings.Cut(rest, "/instances/")
			reported = append(reported, hostInst{host, uuid})
		}
	}

	for _, p := range providers {
		for rc, used := range p.Usages {
			inv, ok := p.Inventories[rc]
			switch {
			case !ok && used > 0:
				fail("provider %s uses %d %s it has no inventory of", p.Name, used, rc)
			case ok && used > inv.Capacity():
				fail("provider %s over capacity: %d %s used, capacity (%d-%d)*%g = %d",
					p.Name, used, rc, inv.Total, inv.Reserved, inv.AllocationRatio, inv.Capacity())
			}
		}
	}
	for uuid, con := range consumers {
		in, ok := instances[uuid]
		switch {
		case !ok:
			fail("allocation of consumer %s without an instance: %v", uuid, con.Allocations)
		case in.Status != etcdschema.StatusActive && in.Status != etcdschema.StatusBuild:
			fail("allocation of consumer %s whose instance is %s: %v", uuid, in.Status, con.Allocations)
		case in.Status == etcdschema.StatusActive:
			want := agent.ProviderUUIDForHost(in.Host)
			for prov := range con.Allocations {
				if prov != want {
					fail("ACTIVE instance %s on %s holds an allocation on another provider %s", uuid, in.Host, providerName(providers, prov))
				}
			}
		}
	}
	for uuid, in := range instances {
		if (in.Status == etcdschema.StatusActive || in.Status == etcdschema.StatusBuild) && in.Host != "" {
			if con, ok := consumers[uuid]; !ok || len(con.Allocations) == 0 {
				fail("%s instance %s on %s has no allocation", in.Status, uuid, in.Host)
			}
		}
	}
	for _, r := range reported {
		in, ok := instances[r.uuid]
		if !ok || in.Host != r.host {
			fail("host %s reports instance %s that etcd places on %q (record found: %v)", r.host, r.uuid, in.Host, ok)
		}
	}

	// The moves' (moves_invariants_test.go): every migration final and
	// its consumer gone, usage = the flavors of the instances on a host.
	bad = append(bad, moveInvariants(ctx, c.cli, c.keys, true, "")...)

	if len(bad) > 0 {
		sort.Strings(bad)
		if len(bad) > 30 {
			bad = append(bad[:30], fmt.Sprintf("... and %d more", len(bad)-30))
		}
		c.t.Errorf("%s: invariants broken at etcd revision %d:\n  %s", scenario, rev, strings.Join(bad, "\n  "))
	}
	c.waitMembersAgree(30 * time.Second)
	c.t.Logf("%s: invariants hold: %d servers listed (%d asked for), %d instances, %d allocations, %d providers; checked in %s",
		scenario, len(list), requested, len(instances), len(consumers), len(providers), time.Since(start).Round(time.Millisecond))
}

func providerName(ps map[string]etcdschema.Provider, uuid string) string {
	if p, ok := ps[uuid]; ok {
		return p.Name
	}
	return uuid
}

// waitMembersAgree polls, with a deadline, until every etcd member
// running reports the same cluster id and leader, has applied the same
// revision, and hashes its keys and values at that revision the same
// (HashKV): a member that lagged or diverged is named.
func (c *mhCluster) waitMembersAgree(timeout time.Duration) {
	c.t.Helper()
	var names []string
	for _, n := range c.etcdNames {
		if p, ok := c.etcd[n]; ok && p.running() {
			names = append(names, n)
		}
	}
	clis := map[string]*clientv3.Client{}
	eps := map[string]string{}
	for i, n := range c.etcdNames {
		eps[n] = c.etcdURL(i)
	}
	for _, n := range names {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{eps[n]}, DialTimeout: 2 * time.Second, TLS: c.rootTLS()})
		if err != nil {
			c.t.Fatalf("etcd client for %s: %v", n, err)
		}
		defer cli.Close()
		clis[n] = cli
	}
	testwait.Poll(c.t, timeout, fmt.Sprintf("etcd members %v to agree", names), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var clusterID, leader uint64
		var maxRev int64
		var state []string
		for i, n := range names {
			st, err := clis[n].Status(ctx, eps[n])
			if err != nil {
				return false, fmt.Sprintf("%s status: %v", n, err)
			}
			state = append(state, fmt.Sprintf("%s: cluster %x leader %x rev %d raft %d/%d",
				n, st.Header.ClusterId, st.Leader, st.Header.Revision, st.RaftIndex, st.RaftAppliedIndex))
			if i == 0 {
				clusterID, leader = st.Header.ClusterId, st.Leader
			} else if st.Header.ClusterId != clusterID || st.Leader != leader || leader == 0 {
				return false, strings.Join(state, "; ")
			}
			maxRev = max(maxRev, st.Header.Revision)
		}
		// Writes go on while we look: compare every member at the highest
		// revision one of them reported, once each has applied it.
		var hash uint32
		for i, n := range names {
			h, err := clis[n].HashKV(ctx, eps[n], maxRev)
			if err != nil {
				return false, fmt.Sprintf("%s HashKV at %d: %v (%s)", n, maxRev, err, strings.Join(state, "; "))
			}
			if i == 0 {
				hash = h.Hash
			} else if h.Hash != hash {
				return false, fmt.Sprintf("%s hashes revision %d as %x, %s as %x (%s)", n, maxRev, h.Hash, names[0], hash, strings.Join(state, "; "))
			}
		}
		return true, ""
	})
}
