package images

import (
	"context"
	"errors"

	"github.com/berth-project/berth/compute"
	"github.com/berth-project/berth/identity"
)

var _ compute.ImageCatalog = (*Store)(nil)

// Image is compute.ImageCatalog's lookup: the image a server create's
// imageRef names, as the compute API stores it with the server. An id
// that is not a UUID, or names no image, is compute.ErrImageNotFound.
//
// It does not check that the caller may see the image: the catalog is
// given no credentials (see the package doc, and ImageFor).
func (s *Store) Image(ctx context.Context, id string) (compute.Image, error) {
	return s.lookup(ctx, id, nil)
}

// ImageFor is Image as Nova's GET of the image with the user's token
// sees it: an image the caller may not see (another project's private
// or shared image) is compute.ErrImageNotFound, as Glance's 404 is to
// Nova. It is for a catalog interface that carries the caller's
// credentials, should the compute API's grow one.
func (s *Store) ImageFor(ctx context.Context, creds identity.Credentials, id string) (compute.Image, error) {
	who := callerOf(creds)
	return s.lookup(ctx, id, &who)
}

func (s *Store) lookup(ctx context.Context, id string, who *caller) (compute.Image, error) {
	img, err := s.Get(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && who != nil && !who.sees(img)) {
		return compute.Image{}, compute.ErrImageNotFound
	}
	if err != nil {
		return compute.Image{}, err
	}
	out := compute.Image{ID: img.ID, Command: img.Command, MinRAMMB: img.MinRAMMB, MinDiskGB: img.MinDiskGB}
	if img.Name != nil {
		out.Name = *img.Name
	}
	return out, nil
}
