package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/logtest"
	"github.com/berth-project/berth/internal/testwait"
)

func storeOps(keys etcdschema.Keys, uuid string) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpPut(keys.InstanceMapping(uuid), "m"),
		clientv3.OpPut(keys.BuildRequest(uuid), "b"),
	}
}

// clusterAPI is an API server on a real 3-member cluster, logging
// warnings to logs, for the tests that take the cluster's quorum away.
func clusterAPI(t *testing.T) (*etcdtest.Cluster, *clientv3.Client, etcdschema.Keys, *Server, *logtest.Buffer) {
	t.Helper()
	if testing.Short() {
		t.Skip("waits out etcd's proposal timeout")
	}
	c := etcdtest.StartCluster(t, 3)
	cli := c.Client()
	keys := etcdschema.New("/t")
	if err := EnsureFlavors(context.Background(), cli, keys, DefaultFlavors()); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	return c, cli, keys, New(cli, keys, noAllocations{}, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Warn})), logs
}

// A cluster that loses its quorum while build requests are stored: the
// store is retried until a member comes back, and lands once.
func TestStoreOnceRidesOutLostQuorum(t *testing.T) {
	c, cli, keys, s, logs := clusterAPI(t)

	// One member left: no quorum, nothing commits.
	c.Stop(1)
	c.Stop(2)
	type result struct {
		stored bool
		err    error
	}
	done := make(chan result, 1)
	go func() {
		stored, err := s.servers.StoreOnce(context.Background(), "req-1", keys.InstanceMapping("u1"), nil, storeOps(keys, "u1"))
		done <- result{stored, err}
	}()
	waitForLog(t, logs, "store build requests: etcd cannot commit for now, retrying", nil)
	c.Restart(1) // the quorum is back
	r := <-done
	if r.err != nil || !r.stored {
		t.Fatalf("storeOnce after the quorum came back: stored %v, err %v; logs:\n%s", r.stored, r.err, logs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, keys.InstanceMapping("u1"))
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Version != 1 {
		t.Fatalf("instance mapping after the retries: %+v %v; want one key written once", resp, err)
	}
}

// An attempt that landed but whose answer was lost makes the retry fail
// on the guard: that reads as stored, and nothing is written again.
func TestStoreRetryTakesALandedAttemptAsStored(t *testing.T) {
	cli := etcdtest.Client(t)
	keys := etcdschema.New("/t")
	s := New(cli, keys, noAllocations{}, hclog.NewNullLogger())
	ctx := context.Background()
	for _, retry := range []bool{false, true, true} {
		stored, err := s.servers.StoreAttempt(ctx, retry, keys.InstanceMapping("u1"), nil, storeOps(keys, "u1"))
		if err != nil || !stored {
			t.Fatalf("attempt (retry %v): stored %v, err %v", retry, stored, err)
		}
	}
	resp, err := cli.Get(ctx, keys.BuildRequest("u1"))
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Version != 1 {
		t.Fatalf("build request: %+v %v; want it written once", resp.Kvs, err)
	}

	// A retry whose earlier attempt did not land writes.
	if stored, err := s.servers.StoreAttempt(ctx, true, keys.InstanceMapping("u3"), nil, storeOps(keys, "u3")); err != nil || !stored {
		t.Fatalf("first landing on a retry: stored %v, err %v", stored, err)
	}
	if resp, err := cli.Get(ctx, keys.BuildRequest("u3")); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("build request of a retry's landing: %+v %v", resp.Kvs, err)
	}

	// A failed compare of the caller's own (the server group gone) is not
	// stored, and writes nothing, on a first attempt or a retry.
	gone := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(keys.ServerGroup("g")), ">", 0)}
	for _, retry := range []bool{false, true} {
		stored, err := s.servers.StoreAttempt(ctx, retry, keys.InstanceMapping("u2"), gone, storeOps(keys, "u2"))
		if err != nil || stored {
			t.Fatalf("with the group gone (retry %v): stored %v, err %v; want not stored", retry, stored, err)
		}
	}
	if resp, err := cli.Get(ctx, keys.InstanceMapping("u2")); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("instance mapping with the group gone: %+v %v", resp.Kvs, err)
	}
}

// A delete while the cluster has lost its quorum is retried until a
// member comes back, then accepted.
func TestDeleteRidesOutLostQuorum(t *testing.T) {
	c, cli, keys, a, logs := clusterAPI(t)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	status, out := do(t, http.MethodPost, srv.URL+"/v1/servers", `{"name":"a","flavor":"m1.small"}`)
	if status != http.StatusAccepted {
		t.Fatalf("create: %d %v", status, out)
	}
	id := out["server"].(map[string]any)["id"].(string)

	status = requestDuringLostQuorum(t, c, logs, "delete server: etcd cannot commit for now, retrying", http.MethodDelete, srv.URL+"/v1/servers/"+id, "")
	if status != http.StatusNoContent {
		t.Fatalf("delete after the quorum came back: status %d; logs:\n%s", status, logs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := cli.Get(ctx, keys.InstanceMapping(id)); err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("instance mapping after the delete: %+v %v", resp, err)
	}
}

// waitForLog polls logs until want appears, failing if the request ends
// first (done) or a minute passes.
func waitForLog(t *testing.T, logs *logtest.Buffer, want string, done <-chan int) {
	t.Helper()
	testwait.Poll(t, time.Minute, fmt.Sprintf("%q logged", want), func() (bool, string) {
		if strings.Contains(logs.String(), want) {
			return true, ""
		}
		select {
		case status := <-done:
			t.Fatalf("the request ended (%d) before %q was logged; logs:\n%s", status, want, logs)
		default:
		}
		return false, "logs:\n" + logs.String()
	})
}

// requestDuringLostQuorum is requestsDuringLostQuorum of one request.
func requestDuringLostQuorum(t *testing.T, c *etcdtest.Cluster, logs *logtest.Buffer, retryLog, method, url, body string) int {
	t.Helper()
	return requestsDuringLostQuorum(t, c, logs, quorumRequest{retryLog, method, url, body})[0]
}

// quorumRequest is an HTTP request sent while the quorum is lost, and the
// line its handler logs when its first attempt hit etcd's timeout.
type quorumRequest struct{ retryLog, method, url, body string }

// requestsDuringLostQuorum stops two of c's three members, sends the
// requests at once, waits until the server has logged every one's retry
// line (their first attempts hit etcd's proposal timeout), gives the
// quorum back and returns their statuses in order.
func requestsDuringLostQuorum(t *testing.T, c *etcdtest.Cluster, logs *logtest.Buffer, reqs ...quorumRequest) []int {
	t.Helper()
	c.Stop(1)
	c.Stop(2)
	done := make([]chan int, len(reqs))
	for i, q := range reqs {
		done[i] = make(chan int, 1)
		go func() {
			req, _ := http.NewRequest(q.method, q.url, strings.NewReader(q.body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				done[i] <- -1
				return
			}
			resp.Body.Close()
			done[i] <- resp.StatusCode
		}()
	}
	for i, q := range reqs {
		waitForLog(t, logs, q.retryLog, done[i])
	}
	c.Restart(1)
	out := make([]int, len(reqs))
	for i := range reqs {
		out[i] = <-done[i]
	}
	return out
}

// A service disabled while the cluster has lost its quorum is recorded
// once a member comes back.
func TestServiceUpdateRidesOutLostQuorum(t *testing.T) {
	c, cli, keys, a, logs := clusterAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A host that reads down (no alive key): the update waits for no trait.
	if _, err := cli.Put(ctx, keys.Service("h1"), etcdschema.MustEncode(&etcdschema.Service{Host: "h1", Cell: "cell1"})); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)

	status := requestDuringLostQuorum(t, c, logs, "update service: etcd cannot commit for now, retrying",
		http.MethodPut, srv.URL+"/v1/services/h1", `{"status":"disabled","disabled_reason":"maintenance"}`)
	if status != http.StatusOK {
		t.Fatalf("disable after the quorum came back: status %d; logs:\n%s", status, logs)
	}
	resp, err := cli.Get(ctx, keys.Service("h1"))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("service record: %+v %v", resp, err)
	}
	var svc etcdschema.Service
	if err := etcdschema.Decode(keys.Service("h1"), resp.Kvs[0].Value, &svc); err != nil || !svc.Disabled || svc.DisabledReason != "maintenance" {
		t.Fatalf("service after the disable: %+v %v", svc, err)
	}
}

// A server group created and another deleted while the cluster has lost
// its quorum: both land once a member comes back.
func TestServerGroupsRideOutLostQuorum(t *testing.T) {
	c, cli, keys, a, logs := clusterAPI(t)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	status, out := do(t, http.MethodPost, srv.URL+"/v1/server-groups", `{"server_group":{"name":"old","policy":"affinity"}}`)
	if status != http.StatusOK {
		t.Fatalf("create the group to delete: %d %v", status, out)
	}
	old := out["server_group"].(map[string]any)["id"].(string)

	got := requestsDuringLostQuorum(t, c, logs,
		quorumRequest{"store server group: etcd cannot commit for now, retrying", http.MethodPost,
			srv.URL + "/v1/server-groups", `{"server_group":{"name":"new","policy":"anti-affinity"}}`},
		quorumRequest{"delete server group: etcd cannot commit for now, retrying", http.MethodDelete,
			srv.URL + "/v1/server-groups/" + old, ""})
	if got[0] != http.StatusOK || got[1] != http.StatusNoContent {
		t.Fatalf("create and delete after the quorum came back: %v, want [200 204]; logs:\n%s", got, logs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, keys.ServerGroups(), clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, kv := range resp.Kvs {
		var g etcdschema.ServerGroup
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &g); err == nil {
			names = append(names, g.Name)
		}
	}
	if len(names) != 1 || names[0] != "new" {
		t.Fatalf("server groups after the quorum came back: %v, want [new]", names)
	}
}
