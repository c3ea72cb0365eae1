package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Save streams a snapshot of the member at cfg's first endpoint into
// out and returns what is in it. A snapshot is one member's whole
// database, so one member is enough; asking one (not the client's
// balancer) keeps the file from being a mix of two. The file appears
// only once complete and synced: the stream goes to a temp file beside
// out, which is checked with Status and then renamed over out.
func Save(ctx context.Context, cfg clientv3.Config, out string) (Info, error) {
	if len(cfg.Endpoints) == 0 {
		return Info{}, errors.New("snapshot save: no etcd endpoint")
	}
	cfg.Endpoints = cfg.Endpoints[:1]
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop() // the client's info lines would land in a CLI's output
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return Info{}, fmt.Errorf("snapshot save: connect to %s: %w", cfg.Endpoints[0], err)
	}
	defer cli.Close()
	return SaveFrom(ctx, cli, out)
}

// SaveFrom is Save with a client the caller made; the client should
// reach a single member (see Save).
func SaveFrom(ctx context.Context, cli *clientv3.Client, out string) (info Info, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".part-*")
	if err != nil {
		return Info{}, fmt.Errorf("snapshot save: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("snapshot save: ask for a snapshot: %w", err)
	}
	defer rc.Close()
	if _, err = io.Copy(tmp, rc); err != nil {
		return Info{}, fmt.Errorf("snapshot save: receive: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return Info{}, fmt.Errorf("snapshot save: sync %s: %w", tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return Info{}, fmt.Errorf("snapshot save: close %s: %w", tmp.Name(), err)
	}
	// A snapshot that does not open or whose trailing sha256 is wrong
	// must not replace a good older one.
	if info, err = Status(tmp.Name()); err != nil {
		return Info{}, fmt.Errorf("snapshot save: the received snapshot is unreadable: %w", err)
	}
	if err = os.Rename(tmp.Name(), out); err != nil {
		return Info{}, fmt.Errorf("snapshot save: %w", err)
	}
	if err = syncDir(filepath.Dir(out)); err != nil {
		return Info{}, fmt.Errorf("snapshot save: %w", err)
	}
	return info, nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
