package stack

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-project/berth/api"
	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/embedetcd"
	"github.com/berth-project/berth/internal/etcdtest"
	"github.com/berth-project/berth/internal/status"
	"github.com/berth-project/berth/internal/testwait"
)

// TestStackRecoversFromNoSpace: a whole control plane over a member with a
// small quota. Once something fills the quota and etcd refuses writes,
// the scheduler leader recovers with no operator: writes are accepted
// again, /readyz is ready, the server built before is still ACTIVE and a
// new one builds.
func TestStackRecoversFromNoSpace(t *testing.T) {
	const quota = 16 << 20
	srv := etcdtest.StartWith(t, func(c *embedetcd.Config) { c.QuotaBackendBytes = quota })
	s := startTestStackWith(t, srv.Client(), []string{"good"}, nil, func(c *configs.Config) {
		c.Scheduler.LeaderInterval = 200 * time.Millisecond
	})
	base := s.endpoints["status"]
	waitReady(t, base)
	c := api.NewClient(s.endpoints["compute API"])
	before := create(t, c, "before", "good")
	if v := waitStatus(t, c, before); v.Status != "ACTIVE" {
		t.Fatalf("server before = %s, want ACTIVE", v.Status)
	}

	// A history that fills the quota (a churn's deleted records are the
	// same to etcd): rewrites of a few keys outside Berth's prefix.
	ctx := context.Background()
	cli := srv.Client()
	etcdtest.FillUntilNoSpace(t, cli, quota)
	testwait.Poll(t, time.Minute, "writes to be accepted again", func() (bool, string) {
		_, err := cli.Put(ctx, "/after", "written")
		return err == nil, fmt.Sprint(err)
	})
	waitReady(t, base)
	if code, body := get(t, base+status.PathMetrics); code != http.StatusOK || !strings.Contains(body, "berth_etcd_nospace_recoveries_total 1") {
		t.Errorf("/metrics after the recovery: want berth_etcd_nospace_recoveries_total 1")
	}
	if v := waitStatus(t, c, before); v.Status != "ACTIVE" {
		t.Errorf("server before = %s after the recovery, want ACTIVE", v.Status)
	}
	if v := waitStatus(t, c, create(t, c, "after", "good")); v.Status != "ACTIVE" {
		t.Errorf("server created after the recovery = %s, want ACTIVE", v.Status)
	}
}
