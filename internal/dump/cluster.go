package dump

import (
	"context"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cluster is what etcd says about itself, read just after the snapshot:
// its members and each endpoint's status. A bug report about a lost
// member or a split needs it; an error reading it is kept here and never
// fails the dump (a user without etcd's root role may not list members).
type Cluster struct {
	ClusterID string           `json:"cluster_id,omitempty"`
	Members   []EtcdMember     `json:"members"`
	Endpoints []EndpointStatus `json:"endpoints"`
	Error     string           `json:"error,omitempty"` // the member list could not be read
}

// EtcdMember is one member of the etcd cluster.
type EtcdMember struct {
	ID         string   `json:"id"` // hex, as etcdctl member list prints it
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peer_urls"`
	ClientURLs []string `json:"client_urls"`
	Learner    bool     `json:"learner,omitempty"`
	// Leader: an endpoint's status names this member the raft leader.
	Leader bool `json:"leader"`
}

// EndpointStatus is one endpoint's answer to a status request.
type EndpointStatus struct {
	Endpoint  string   `json:"endpoint"`
	MemberID  string   `json:"member_id,omitempty"`
	Version   string   `json:"version,omitempty"`
	DBSize    int64    `json:"db_size,omitempty"`
	Leader    string   `json:"leader,omitempty"`
	RaftTerm  uint64   `json:"raft_term,omitempty"`
	RaftIndex uint64   `json:"raft_index,omitempty"`
	Alarms    []string `json:"errors,omitempty"` // the member's own errors (e.g. NOSPACE)
	Error     string   `json:"error,omitempty"`  // the request failed
}

// statusTimeout bounds each endpoint's status request: a dead member must
// not hold up the dump of a cluster that still answers.
const statusTimeout = 3 * time.Second

func readCluster(ctx context.Context, cli *clientv3.Client) *Cluster {
	c := &Cluster{Members: []EtcdMember{}, Endpoints: []EndpointStatus{}}
	leaders := map[uint64]bool{}
	for _, ep := range cli.Endpoints() {
		st := EndpointStatus{Endpoint: ep}
		sctx, cancel := context.WithTimeout(ctx, statusTimeout)
		resp, err := cli.Status(sctx, ep)
		cancel()
		if err != nil {
			st.Error = err.Error()
		} else {
			st.Version, st.DBSize, st.RaftTerm, st.RaftIndex = resp.Version, resp.DbSize, resp.RaftTerm, resp.RaftIndex
			st.Alarms = resp.Errors
			if resp.Header != nil {
				st.MemberID = fmt.Sprintf("%x", resp.Header.MemberId)
			}
			if resp.Leader != 0 {
				st.Leader = fmt.Sprintf("%x", resp.Leader)
				leaders[resp.Leader] = true
			}
		}
		c.Endpoints = append(c.Endpoints, st)
	}
	mctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	ml, err := cli.MemberList(mctx)
	if err != nil {
		c.Error = fmt.Sprintf("member list: %v", err)
		return c
	}
	if ml.Header != nil {
		c.ClusterID = fmt.Sprintf("%x", ml.Header.ClusterId)
	}
	for _, m := range ml.Members {
		c.Members = append(c.Members, EtcdMember{ID: fmt.Sprintf("%x", m.ID), Name: m.Name, PeerURLs: m.PeerURLs,
			ClientURLs: m.ClientURLs, Learner: m.IsLearner, Leader: leaders[m.ID]})
	}
	sort.Slice(c.Members, func(a, b int) bool { return c.Members[a].Name < c.Members[b].Name })
	return c
}
