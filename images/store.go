package images

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/berth-project/berth/etcdschema"
)

// Glance's visibilities, and the status every Berth image has: there is
// no data to upload, so an image is usable the moment it exists.
const (
	VisibilityPublic    = "public"
	VisibilityPrivate   = "private"
	VisibilityShared    = "shared"
	VisibilityCommunity = "community"
	StatusActive        = "active"
)

// Visibilities are Glance's four, in its schema's order.
var Visibilities = []string{VisibilityCommunity, VisibilityPublic, VisibilityPrivate, VisibilityShared}

// The store's errors; the API answers each in Glance's words.
var (
	ErrNotFound  = errors.New("image not found")
	ErrDuplicate = errors.New("image id already exists")
	ErrProtected = errors.New("image is protected")
	ErrTooLarge  = errors.New("image record too large")
)

// maxRecordBytes bounds one image's record: it is one etcd value, and
// etcd refuses a request past its max-request-bytes (1.5 MiB by
// default) with an error a client could only retry in vain.
const maxRecordBytes = 512 << 10

// Store keeps images in etcd, one etcdschema.Image under Keys.Image(id).
// Glance lets names repeat, so nothing else is reserved: a create only
// needs its id's key to be absent. Lists read every image at one
// revision: a deployment has tens of images, not thousands.
type Store struct {
	cli  *clientv3.Client
	keys etcdschema.Keys
	// recentImages are server creates' lookups (cache.go): an update or
	// delete through this store forgets its image at once; one through
	// another process is caught by the create's own compare.
	recentImages recentImages
}

// NewStore is the store of the images under keys.
func NewStore(cli *clientv3.Client, keys etcdschema.Keys) *Store {
	return &Store{cli: cli, keys: keys}
}

// conflictAttempts bounds the optimistic retries of one update: each
// lost race means another writer committed, so the loop progresses.
const conflictAttempts = 16

// validID says whether id may name an image (and so an etcd key):
// Glance's schema pattern, a hyphenated UUID.
func validID(id string) bool {
	if len(id) != 36 {
		return false
	}
	_, err := uuid.Parse(id)
	return err == nil
}

// check refuses a record no writer may store, whatever API it came
// through.
func check(img *etcdschema.Image) error {
	if !validID(img.ID) {
		return fmt.Errorf("image id %q is not a UUID", img.ID)
	}
	if !slices.Contains(Visibilities, img.Visibility) {
		return fmt.Errorf("image %s: visibility %q is not one of %v", img.ID, img.Visibility, Visibilities)
	}
	if img.Command != nil {
		if _, err := ParseCommand(FormatCommand(img.Command)); err != nil {
			return fmt.Errorf("image %s: %w", img.ID, err)
		}
	}
	if _, ok := img.Properties[CommandProperty]; ok {
		return fmt.Errorf("image %s: %s belongs in Command, not Properties", img.ID, CommandProperty)
	}
	return nil
}

// encode is the record's value, ErrTooLarge past maxRecordBytes.
func encode(img *etcdschema.Image) (string, error) {
	val, err := etcdschema.EncodeString(img)
	if err != nil {
		return "", err
	}
	if len(val) > maxRecordBytes {
		return "", fmt.Errorf("%w: image %s is %d bytes, more than %d", ErrTooLarge, img.ID, len(val), maxRecordBytes)
	}
	return val, nil
}

// Get reads image id; ErrNotFound when there is none (or id cannot be
// one).
func (s *Store) Get(ctx context.Context, id string) (*etcdschema.Image, error) {
	img, _, err := s.get(ctx, id)
	return img, err
}

func (s *Store) get(ctx context.Context, id string) (*etcdschema.Image, int64, error) {
	if !validID(id) {
		return nil, 0, ErrNotFound
	}
	key := s.keys.Image(id)
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return nil, 0, fmt.Errorf("read image %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, ErrNotFound
	}
	var img etcdschema.Image
	if err := etcdschema.Decode(key, resp.Kvs[0].Value, &img); err != nil {
		return nil, 0, err
	}
	return &img, resp.Kvs[0].ModRevision, nil
}

// List reads every image at one revision, in no particular order. A
// record this build cannot read is an error: a list without it would
// not be the cloud's.
func (s *Store) List(ctx context.Context) ([]etcdschema.Image, error) {
	resp, err := s.cli.Get(ctx, s.keys.Images(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	out := make([]etcdschema.Image, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var img etcdschema.Image
		if err := etcdschema.Decode(string(kv.Key), kv.Value, &img); err != nil {
			return nil, err
		}
		out = append(out, img)
	}
	return out, nil
}

// Create stores img if no image has its id (ErrDuplicate otherwise).
func (s *Store) Create(ctx context.Context, img *etcdschema.Image) error {
	if err := check(img); err != nil {
		return err
	}
	val, err := encode(img)
	if err != nil {
		return err
	}
	key := s.keys.Image(img.ID)
	resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val)).Commit()
	if err != nil {
		return fmt.Errorf("create image %s: %w", img.ID, err)
	}
	if !resp.Succeeded {
		return ErrDuplicate
	}
	return nil
}

// Update applies change to image id, committing only over the record
// change saw, and returns the image as stored. change may return an
// error to refuse (it is returned as is).
func (s *Store) Update(ctx context.Context, id string, change func(*etcdschema.Image) error) (*etcdschema.Image, error) {
	for range conflictAttempts {
		img, rev, err := s.get(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := change(img); err != nil {
			return nil, err
		}
		if img.ID != id {
			return nil, fmt.Errorf("update image %s: the id may not change", id)
		}
		if err := check(img); err != nil {
			return nil, err
		}
		val, err := encode(img)
		if err != nil {
			return nil, err
		}
		key := s.keys.Image(id)
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, val)).Commit()
		if err != nil {
			return nil, fmt.Errorf("update image %s: %w", id, err)
		}
		if resp.Succeeded {
			s.ForgetImage(id)
			return img, nil
		}
	}
	return nil, errors.New("update image " + id + ": it kept changing; gave up")
}

// Delete removes image id, unless it is protected (ErrProtected) or
// allow refuses it (allow's error is returned as is; nil allows all).
// The check and the delete see the same record: a protected flag set
// meanwhile wins. Servers keep their own copy of their image, as
// Nova's instances keep their image's metadata.
func (s *Store) Delete(ctx context.Context, id string, allow func(*etcdschema.Image) error) error {
	for range conflictAttempts {
		img, rev, err := s.get(ctx, id)
		if err != nil {
			return err
		}
		if allow != nil {
			if err := allow(img); err != nil {
				return err
			}
		}
		if img.Protected {
			return ErrProtected
		}
		key := s.keys.Image(id)
		resp, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return fmt.Errorf("delete image %s: %w", id, err)
		}
		if resp.Succeeded {
			s.ForgetImage(id)
			return nil
		}
	}
	return errors.New("delete image " + id + ": it kept changing; gave up")
}

// Image is the record the API works on.
type Image = etcdschema.Image
