package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-project/berth/configs"
	"github.com/berth-project/berth/internal/backup"
)

const etcdSnapshotLong = `Backup and restore of Berth's only state store. save streams one
member's database (the first endpoint of FILE's etcd block, or an embedded
member's client_url) into OUT, whole or not at all. restore makes a data
dir for a member of a NEW cluster from a snapshot: stop every berth
process first, restore every member from the same snapshot with the same
--initial-cluster, then start the members, then the rest
(docs/operations.md, "Backup and restore").`

// newEtcdCmd is `berth etcd`: operations on the etcd cluster itself.
func newEtcdCmd(s *streams) *cobra.Command {
	etcd := groupCmd("etcd", "the etcd cluster that holds Berth's state")
	snap := groupCmd("snapshot", "save, inspect and restore etcd snapshots (backups)")
	snap.Long = etcdSnapshotLong
	snap.AddCommand(newSnapshotSaveCmd(s), newSnapshotStatusCmd(s), newSnapshotRestoreCmd(s))
	etcd.AddCommand(snap)
	return etcd
}

func newSnapshotSaveCmd(s *streams) *cobra.Command {
	var config string
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "save --config FILE OUT",
		Short: "write a snapshot of one member's database to OUT",
		Args:  exactArgs("OUT"),
		RunE: func(_ *cobra.Command, args []string) error {
			if config == "" {
				return usageErrorf("--config is required")
			}
			return codeErr(cmdSnapshotSave(config, args[0], timeout, s.out, s.err))
		},
	}
	c.Flags().StringVar(&config, "config", "", "a config whose etcd block reaches the cluster (required)")
	c.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
	return c
}

func cmdSnapshotSave(path, out string, timeout time.Duration, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintln(stderr, "berth etcd snapshot save:", err)
		return 1
	}
	cfg, err := configs.Load(path)
	if err != nil {
		return fail(err)
	}
	cc, err := cfg.Etcd.ClientConfig()
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	info, err := backup.Save(ctx, cc, out)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "saved %s from %s: %s\n", out, cc.Endpoints[0], info)
	return 0
}

func newSnapshotStatusCmd(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "status SNAPSHOT",
		Short: "a snapshot's size, revision, key count and hash",
		Args:  exactArgs("SNAPSHOT"),
		RunE: func(_ *cobra.Command, args []string) error {
			info, err := backup.Status(args[0])
			if err != nil {
				fmt.Fprintln(s.err, "berth etcd snapshot status:", err)
				return codeErr(1)
			}
			fmt.Fprintf(s.out, "%s: %s\n", args[0], info)
			return nil
		},
	}
}

// snapshotRestoreFlags name the new member: from a config's embedded
// etcd block, each flag overriding it.
type snapshotRestoreFlags struct {
	config, name, dataDir, peerURL, initialCluster string
}

func newSnapshotRestoreCmd(s *streams) *cobra.Command {
	f := &snapshotRestoreFlags{}
	c := &cobra.Command{
		Use:   "restore SNAPSHOT {--config FILE | --name N --data-dir D --peer-url U --initial-cluster C}",
		Short: "make a new member's data dir from a snapshot (for a NEW cluster)",
		Long: `Writes SNAPSHOT into an empty data dir as a member of a new cluster, as
etcdutl snapshot restore does. The member is the one FILE's etcd block
runs (berth run etcd --config FILE); the flags override its fields. Run
it once per member, on that member's machine, with the same snapshot and
the same initial cluster. It refuses a data dir that is not empty.`,
		Args: exactArgs("SNAPSHOT"),
		RunE: func(_ *cobra.Command, args []string) error {
			m, err := f.member()
			if err != nil {
				return err
			}
			if err := backup.Restore(args[0], m); err != nil {
				fmt.Fprintln(s.err, "berth etcd snapshot restore:", err)
				return codeErr(1)
			}
			fmt.Fprintf(s.out, "restored %s into %s as member %s of %s\n", args[0], m.DataDir, m.Name, m.InitialCluster)
			return nil
		},
	}
	fs := c.Flags()
	fs.StringVar(&f.config, "config", "", "the member's config (its etcd embedded block)")
	fs.StringVar(&f.name, "name", "", "the member's name")
	fs.StringVar(&f.dataDir, "data-dir", "", "the new, empty data dir")
	fs.StringVar(&f.peerURL, "peer-url", "", "the member's peer URL")
	fs.StringVar(&f.initialCluster, "initial-cluster", "", `every member of the new cluster, "name=peerURL,..."`)
	return c
}

// member is the member f names, its config's fields overridden by flags.
func (f *snapshotRestoreFlags) member() (backup.Member, error) {
	var m backup.Member
	if f.config != "" {
		cfg, err := configs.Load(f.config)
		if err != nil {
			return m, &exitError{code: 1, err: err}
		}
		e := cfg.Etcd.Embedded
		if e == nil {
			return m, usageErrorf("%s has no embedded etcd member (an etcd block with endpoints is a client's, not a member's)", f.config)
		}
		m = backup.Member{Name: e.Name, DataDir: e.DataDir, PeerURL: e.PeerURL, InitialCluster: e.InitialCluster}
	}
	for _, o := range []struct {
		flag string
		dst  *string
	}{
		{f.name, &m.Name}, {f.dataDir, &m.DataDir}, {f.peerURL, &m.PeerURL}, {f.initialCluster, &m.InitialCluster},
	} {
		if o.flag != "" {
			*o.dst = o.flag
		}
	}
	if m.DataDir == "" || m.PeerURL == "" {
		return m, usageErrorf("name the member: --config FILE, or --data-dir and --peer-url (with --name and --initial-cluster for a cluster of several)")
	}
	return m, nil
}
