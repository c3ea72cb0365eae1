package images

import (
	"context"
	"errors"

	"github.com/berth-project/berth/compute"
)

var _ compute.ImageCatalog = (*Store)(nil)

// Image is compute.ImageCatalog's lookup: the image a server create's
// imageRef names, as the compute API stores it with the server. An id
// that is not a UUID, or names no image, is compute.ErrImageNotFound.
//
// It does not check that the caller may see the image: the catalog is
// given no credentials (see the package doc).
func (s *Store) Image(ctx context.Context, id string) (compute.Image, error) {
	img, err := s.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
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
