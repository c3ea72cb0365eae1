package images

import (
	"context"
	"errors"
	"slices"

	"github.com/berth-project/berth/compute"
	"github.com/berth-project/berth/identity"
)

var _ compute.ImageCache = (*Store)(nil)

// Image is compute.ImageCatalog's lookup: the image a server create's
// imageRef names, as the compute API stores it with the server, as
// Nova's GET of the image with the user's token sees it. An id that is
// not a UUID, names no image, or names one the caller may not see
// (another project's private or shared image) is
// compute.ErrImageNotFound, as Glance's 404 is to Nova.
//
// The answer may come from the image as a create last read it (cache.go),
// with the key and mod revision it was read at: the create stores its
// servers only while that record is unchanged, and calls ForgetImage and
// asks again otherwise.
func (s *Store) Image(ctx context.Context, creds identity.Credentials, id string) (compute.Image, error) {
	who := callerOf(creds)
	img, rev, err := s.recent(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && !who.sees(img)) {
		return compute.Image{}, compute.ErrImageNotFound
	}
	if err != nil {
		return compute.Image{}, err
	}
	out := compute.Image{ID: img.ID, Command: slices.Clone(img.Command), MinRAMMB: img.MinRAMMB, MinDiskGB: img.MinDiskGB,
		Key: s.keys.Image(id), ModRevision: rev}
	if img.Name != nil {
		out.Name = *img.Name
	}
	return out, nil
}
