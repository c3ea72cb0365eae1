package images

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// The default images' names: what `openstack image list` shows on a new
// deployment, and what `openstack server create --image` takes.
const (
	// DefaultSleepImage runs `sleep infinity` under the process driver:
	// a server that does nothing until it is deleted.
	DefaultSleepImage = "berth-sleep"
	// DefaultFakeImage has no command: the image the fake driver boots
	// (a name only), as `berth dev`'s simulated hosts do.
	DefaultFakeImage = "berth-fake"
)

// defaultIDSpace makes the defaults' ids: the same on every server and
// every start, so creating them is idempotent and scripts may name them.
var defaultIDSpace = uuid.MustParse("5b0e6f1c-3c2a-4d8e-9f47-0c1d2e3f4a5b")

// DefaultID is the fixed id of the default image name.
func DefaultID(name string) string { return uuid.NewSHA1(defaultIDSpace, []byte(name)).String() }

// Defaults are the images every deployment starts with: public, owned by
// no project, not protected (an admin may delete one; it comes back at
// the next start, as the default flavors do).
func Defaults(now time.Time) []etcdschema.Image {
	raw, bare := "raw", "bare"
	mk := func(name, description string, command []string) etcdschema.Image {
		n := name
		return etcdschema.Image{
			ID: DefaultID(name), Name: &n, Status: StatusActive, Visibility: VisibilityPublic,
			DiskFormat: &raw, ContainerFormat: &bare, Command: command,
			Properties: map[string]string{"description": description},
			CreatedAt:  now, UpdatedAt: now,
		}
	}
	return []etcdschema.Image{
		mk(DefaultSleepImage, "Runs sleep infinity under the process driver: a server that does nothing until deleted.",
			[]string{"sleep", "infinity"}),
		mk(DefaultFakeImage, "No command: a name the fake driver boots (berth dev's simulated hosts).", nil),
	}
}

// EnsureDefaults creates each of images whose id is not taken yet; an
// operator's changes to one that exists are kept. Every server may run
// it at once: each create is one transaction, if absent.
func EnsureDefaults(ctx context.Context, cli *clientv3.Client, keys etcdschema.Keys, images []etcdschema.Image) error {
	for i := range images {
		img := images[i]
		if err := check(&img); err != nil {
			return err
		}
		val, err := etcdschema.EncodeString(&img)
		if err != nil {
			return err
		}
		key := keys.Image(img.ID)
		if _, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, val)).Commit(); err != nil {
			return fmt.Errorf("ensure image %s: %w", *img.Name, err)
		}
	}
	return nil
}
