package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/agent"
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/testwait"
)

// finalMigration says whether a migration status is one a move ends in.
func finalMigration(status string) bool {
	switch status {
	case etcdschema.MigrationConfirmed, etcdschema.MigrationReverted, etcdschema.MigrationError,
		etcdschema.MigrationFailed, etcdschema.MigrationCompleted, etcdschema.MigrationDone,
		etcdschema.MigrationCancelled:
		return true
	}
	return false
}

// flavorResources is what a flavor claims in Placement (the scheduler's
// request filter: root, ephemeral and swap disk in GB, rounded up).
func flavorResources(f etcdschema.Flavor) map[string]int64 {
	return map[string]int64{"VCPU": int64(f.VCPUs), "MEMORY_MB": int64(f.RAMMB),
		"DISK_GB": int64(f.DiskGB) + int64(f.EphemeralGB) + int64((f.SwapMB+1023)/1024)}
}

// moveInvariants reads etcd at one revision and returns every invariant
// of servers and their moves that does not hold:
//   - at rest, every migration is final and has no migration mapping;
//     otherwise each one in flight is waiting in finished (VERIFY_RESIZE),
//     the only in-flight state the tests stop at;
//   - every consumer is an instance or a migration in flight; a
//     migration's consumer holds exactly its old flavor on its source;
//     an instance's holds exactly its flavor on its host (for a server
//     in VERIFY_RESIZE: its new flavor on its destination);
//   - every instance on a host that is ACTIVE or VERIFY_RESIZE has its
//     allocation;
//   - every provider's usage is the sum of its consumers' allocations,
//     which is the flavors of the instances on its host plus the old
//     flavors of the moves in flight that leave it;
//   - no host reports an instance etcd does not place on it;
//   - with a process driver's state dir: every ACTIVE or VERIFY_RESIZE
//     server's guest runs on its host and is recorded by no other host,
//     and no host records a guest of a server that is not there.
func moveInvariants(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys, atRest bool, procDir string) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	all, err := cli.Get(ctx, keys.All(), clientv3.WithPrefix())
	if err != nil {
		return []string{"read etcd: " + err.Error()}
	}
	providers := map[string]etcdschema.Provider{}
	consumers := map[string]etcdschema.Consumer{}
	instances := map[string]etcdschema.Instance{}
	migrations := map[string]etcdschema.Migration{}
	mapped := map[string]bool{}
	type hostInst struct{ host, uuid string }
	var reported []hostInst
	for _, kv := range all.Kvs {
		key := string(kv.Key)
		var err error
		switch {
		case strings.HasPrefix(key, keys.Providers()):
			var p etcdschema.Provider
			if err = etcdschema.Decode(key, kv.Value, &p); err == nil {
				providers[p.UUID] = p
			}
		case strings.HasPrefix(key, keys.Consumers()):
			var c etcdschema.Consumer
			if err = etcdschema.Decode(key, kv.Value, &c); err == nil {
				consumers[c.UUID] = c
			}
		case strings.HasPrefix(key, keys.MigrationMappings()):
			mapped[strings.TrimPrefix(key, keys.MigrationMappings())] = true
		case strings.HasPrefix(key, keys.CellsPrefix()) && strings.Contains(key, "/instances/"):
			var in etcdschema.Instance
			if err = etcdschema.Decode(key, kv.Value, &in); err == nil {
				instances[in.UUID] = in
			}
		case strings.HasPrefix(key, keys.CellsPrefix()) && strings.Contains(key, "/migrations/"):
			var m etcdschema.Migration
			if err = etcdschema.Decode(key, kv.Value, &m); err == nil {
				migrations[m.UUID] = m
			}
		case strings.HasPrefix(key, keys.HostsPrefix()) && strings.Contains(key, "/instances/"):
			host, uuid, _ := strings.Cut(strings.TrimPrefix(key, keys.HostsPrefix()), "/instances/")
			reported = append(reported, hostInst{host, uuid})
		}
		if err != nil {
			fail("%v", err)
		}
	}
	provName := func(uuid string) string {
		if p, ok := providers[uuid]; ok {
			return p.Name
		}
		return uuid
	}
	// want is what each provider should have in use, from the records.
	want := map[string]map[string]int64{}
	add := func(host string, f etcdschema.Flavor) {
		prov := agent.ProviderUUIDForHost(host)
		if want[prov] == nil {
			want[prov] = map[string]int64{}
		}
		for rc, n := range flavorResources(f) {
			want[prov][rc] += n
		}
	}
	// holds checks that consumer holds exactly f on host's provider.
	holds := func(consumer, what, host string, f etcdschema.Flavor) {
		c, ok := consumers[consumer]
		if !ok || len(c.Allocations) == 0 {
			fail("%s holds no allocation, want %s on %s", what, f.Name, host)
			return
		}
		prov := agent.ProviderUUIDForHost(host)
		for p, a := range c.Allocations {
			if p != prov {
				fail("%s holds %v on %s, want only %s on %s", what, a.Resources, provName(p), f.Name, host)
				continue
			}
			for rc, n := range flavorResources(f) {
				if a.Resources[rc] != n {
					fail("%s holds %d %s on %s, want %d (%s)", what, a.Resources[rc], rc, host, n, f.Name)
				}
			}
		}
	}
	inFlight := map[string]etcdschema.Migration{} // by instance
	for _, m := range migrations {
		switch {
		case finalMigration(m.Status):
			if mapped[m.UUID] {
				fail("migration %s is %s but still mapped", m.UUID, m.Status)
			}
			if _, ok := consumers[m.UUID]; ok {
				fail("migration %s is %s but its consumer still holds %v", m.UUID, m.Status, consumers[m.UUID].Allocations)
			}
		case atRest:
			fail("migration %s of %s in flight at rest: %s (%s → %s)", m.UUID, m.InstanceUUID, m.Status, m.SourceHost, m.DestHost)
		case m.Status != etcdschema.MigrationFinished:
			fail("migration %s of %s is %s, not waiting in finished", m.UUID, m.InstanceUUID, m.Status)
		default:
			inFlight[m.InstanceUUID] = m
			holds(m.UUID, "migration "+m.UUID, m.SourceHost, m.OldFlavor)
			add(m.SourceHost, m.OldFlavor)
		}
	}
	for uuid := range consumers {
		if _, inst := instances[uuid]; inst {
			continue
		}
		if m, ok := migrations[uuid]; ok && !finalMigration(m.Status) {
			continue
		}
		fail("allocation of consumer %s, neither an instance nor a migration in flight: %v", uuid, consumers[uuid].Allocations)
	}
	for uuid, in := range instances {
		c, has := consumers[uuid]
		has = has && len(c.Allocations) > 0
		switch in.Status {
		case etcdschema.StatusActive, etcdschema.StatusVerifyResize:
			if m, ok := inFlight[uuid]; ok && (in.Host != m.DestHost || in.Flavor.ID != m.NewFlavor.ID) {
				fail("instance %s on %s with %s, its migration %s says %s with %s", uuid, in.Host, in.Flavor.Name, m.UUID, m.DestHost, m.NewFlavor.Name)
			}
			holds(uuid, fmt.Sprintf("%s instance %s", in.Status, uuid), in.Host, in.Flavor)
			add(in.Host, in.Flavor)
		case etcdschema.StatusError, etcdschema.StatusBuild:
			// An errored server keeps what it held until deleted, as in
			// Nova; a build holds its claim.
			if has && in.Host != "" {
				holds(uuid, fmt.Sprintf("%s instance %s", in.Status, uuid), in.Host, in.Flavor)
				add(in.Host, in.Flavor)
			} else if has {
				fail("%s instance %s without a host holds %v", in.Status, uuid, c.Allocations)
			}
		default:
			fail("instance %s is %s/%s", uuid, in.Status, in.TaskState)
		}
	}
	for _, p := range providers {
		sum := map[string]int64{}
		for _, c := range consumers {
			for rc, n := range c.Allocations[p.UUID].Resources {
				sum[rc] += n
			}
		}
		for _, rc := range []string{"VCPU", "MEMORY_MB", "DISK_GB"} {
			if p.Usages[rc] != sum[rc] {
				fail("provider %s uses %d %s, its consumers hold %d", p.Name, p.Usages[rc], rc, sum[rc])
			}
			if p.Usages[rc] != want[p.UUID][rc] {
				fail("provider %s uses %d %s, its servers and moves account for %d", p.Name, p.Usages[rc], rc, want[p.UUID][rc])
			}
		}
	}
	for _, r := range reported {
		if in, ok := instances[r.uuid]; !ok || in.Host != r.host {
			if m, moving := inFlight[r.uuid]; !moving || m.SourceHost != r.host {
				fail("host %s reports instance %s that etcd places on %q", r.host, r.uuid, in.Host)
			}
		}
	}
	if procDir != "" {
		bad = append(bad, guestInvariants(procDir, instances)...)
	}
	sort.Strings(bad)
	return bad
}

// guestInvariants checks the process driver's records under procDir
// against the instances: each running server's guest on its host only.
func guestInvariants(procDir string, instances map[string]etcdschema.Instance) []string {
	var bad []string
	files, _ := filepath.Glob(filepath.Join(procDir, "*", "*.json"))
	recorded := map[string][]string{} // instance -> hosts recording it
	for _, f := range files {
		host, uuid := filepath.Base(filepath.Dir(f)), strings.TrimSuffix(filepath.Base(f), ".json")
		recorded[uuid] = append(recorded[uuid], host)
		pid, err := readRecordedPID(procDir, host, uuid)
		if err != nil || !processAlive(pid) {
			bad = append(bad, fmt.Sprintf("%s records guest %s, pid %d, not running (%v)", host, uuid, pid, err))
		}
		if in, ok := instances[uuid]; !ok || in.Host != host {
			bad = append(bad, fmt.Sprintf("%s runs guest %s that etcd places on %q", host, uuid, in.Host))
		}
	}
	for uuid, in := range instances {
		if in.Status != etcdschema.StatusActive && in.Status != etcdschema.StatusVerifyResize {
			continue
		}
		if hosts := recorded[uuid]; len(hosts) != 1 || hosts[0] != in.Host {
			bad = append(bad, fmt.Sprintf("%s server %s on %s: its guest runs on %v", in.Status, uuid, in.Host, hosts))
		}
	}
	return bad
}

// checkMoves waits (with a deadline) until the move invariants hold, and
// fails the test with what still does not: a step just recorded may
// still be finishing (a guest stopping, a usage written).
func (c *cluster) checkMoves(what string, atRest bool, procDir string) {
	c.t.Helper()
	checkMovesOn(c.t, c.cli, c.keys, what, atRest, procDir)
}

func checkMovesOn(t *testing.T, cli *clientv3.Client, keys etcdschema.Keys, what string, atRest bool, procDir string) {
	t.Helper()
	testwait.Poll(t, 30*time.Second, what+": the move invariants", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		bad := moveInvariants(ctx, cli, keys, atRest, procDir)
		return len(bad) == 0, "\n  " + strings.Join(bad, "\n  ")
	})
}
