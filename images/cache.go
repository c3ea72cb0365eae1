package images

import (
	"context"
	"sync"

	"github.com/berth-project/berth/etcdschema"
)

// recentImages is what a server create's image lookup remembers: every
// create names its image, and reading and decoding its record each time
// was a third of the compute API's etcd reads per server. An answer from
// here may be stale (the image changed or went since); it is exact all
// the same because it carries the mod revision it was read at, which
// the create compares in the transaction that stores its servers
// (servers.CreateRequest.Checked), asking again afresh (Forget) when it
// fails. Only that caller uses it: every other read is from etcd.
type recentImages struct {
	mu   sync.Mutex
	byID map[string]recentImage
}

// recentImage is a decoded record and the mod revision it was read at.
// img is never changed once stored: callers copy what they keep.
type recentImage struct {
	img    *etcdschema.Image
	modRev int64
}

// maxRecentImages bounds the memory: a deployment has tens of images,
// and past this the whole map is dropped (the next creates read again).
const maxRecentImages = 4096

func (c *recentImages) get(id string) (recentImage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.byID[id]
	return r, ok
}

func (c *recentImages) put(id string, r recentImage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil || len(c.byID) >= maxRecentImages {
		c.byID = map[string]recentImage{}
	}
	if old, ok := c.byID[id]; ok && old.modRev > r.modRev {
		return // a concurrent lookup read a newer record
	}
	c.byID[id] = r
}

func (c *recentImages) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byID, id)
}

// recent is image id as last read by a create, or read now. The answer
// may be stale: see recentImages.
func (s *Store) recent(ctx context.Context, id string) (*etcdschema.Image, int64, error) {
	if r, ok := s.recentImages.get(id); ok {
		return r.img, r.modRev, nil
	}
	img, rev, err := s.get(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	s.recentImages.put(id, recentImage{img: img, modRev: rev})
	return img, rev, nil
}

// ForgetImage drops what the store remembers of image id for creates:
// the next lookup reads it from etcd (compute.ImageCache).
func (s *Store) ForgetImage(id string) { s.recentImages.forget(id) }
