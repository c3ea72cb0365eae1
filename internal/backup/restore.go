package backup

import (
	"errors"
	"fmt"
	"os"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// Member is one member of the new cluster, as its config's etcd
// embedded block names it.
type Member struct {
	Name    string
	DataDir string
	PeerURL string
	// InitialCluster is every member of the NEW cluster, "name=peerURL,...";
	// "" is a cluster of this member alone.
	InitialCluster string
}

// Token is the initial cluster token restored members share: members
// restored with different tokens get different cluster IDs and refuse
// each other.
const Token = "berth-restored"

// Restore writes snapshot into m's data dir as a member of a new
// cluster. The data dir must not exist or be empty: Restore never
// overwrites a member's state. Each member of the new cluster is
// restored from the same snapshot with the same InitialCluster.
func Restore(snapshotPath string, m Member) error {
	if m.DataDir == "" || m.PeerURL == "" {
		return errors.New("snapshot restore: the member needs a data dir and a peer URL")
	}
	if m.Name == "" {
		m.Name = "berth" // embedetcd's default
	}
	if m.InitialCluster == "" {
		m.InitialCluster = m.Name + "=" + m.PeerURL
	}
	if entries, err := os.ReadDir(m.DataDir); err == nil && len(entries) > 0 {
		return fmt.Errorf("snapshot restore: data dir %s is not empty: restore makes a NEW member; move the old data dir away (or choose another) first", m.DataDir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	if _, err := Status(snapshotPath); err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath:        snapshotPath,
		Name:                m.Name,
		OutputDataDir:       m.DataDir,
		PeerURLs:            []string{m.PeerURL},
		InitialCluster:      m.InitialCluster,
		InitialClusterToken: Token,
	})
	if err != nil {
		return fmt.Errorf("snapshot restore into %s: %w", m.DataDir, err)
	}
	return nil
}
