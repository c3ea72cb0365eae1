package backup

import (
	"fmt"

	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// Info is what a snapshot holds.
type Info struct {
	Size     int64  // bytes in the database
	Revision int64  // etcd's revision when it was taken
	Keys     int    // keys (every bucket's, not only Berth's)
	Hash     uint32 // etcd's hash of the database, as etcdutl prints it
	Version  string // etcd's storage version ("" before etcd 3.6)
}

// Status reads a snapshot file without changing it.
func Status(path string) (Info, error) {
	s, err := snapshot.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return Info{}, fmt.Errorf("snapshot status %s: %w", path, err)
	}
	return Info{Size: s.TotalSize, Revision: s.Revision, Keys: s.TotalKey, Hash: s.Hash, Version: s.Version}, nil
}

// String is Info as the CLI prints it.
func (i Info) String() string {
	return fmt.Sprintf("size %d bytes, revision %d, %d keys, hash %08x", i.Size, i.Revision, i.Keys, i.Hash)
}
