package compute

import (
	"context"
	"errors"

	"github.com/berth-project/berth/identity"
)

// Image is what a server boots, as the image service (package images,
// Berth's Glance v2 subset) describes it: for the process driver, the
// command and its arguments the agent runs; for the fake driver, only a
// name.
type Image struct {
	ID, Name string
	// Command is the process driver's argv (a flavor's berth:command
	// before images existed); empty for an image the fake driver boots.
	Command []string
	// MinRAMMB and MinDiskGB are Glance's min_ram and min_disk, which
	// Nova checks against the flavor at create.
	MinRAMMB, MinDiskGB int
	// Key and ModRevision are the etcd record the answer was read from
	// (empty: none to compare). A create stores its servers only while
	// that record is unchanged (servers.CreateRequest.Checked), so a
	// catalog may answer from what it read before (an ImageCache).
	Key         string
	ModRevision int64
}

// ErrImageNotFound is what an ImageCatalog returns for an id it does
// not hold; a server create answers Nova's 400 "Image <id> could not be
// found."
var ErrImageNotFound = errors.New("image not found")

// ImageCatalog is how a server create resolves its imageRef (an image
// id, as Nova's _image_uuid_from_href leaves it) to the image it boots,
// as the caller sees it: Nova asks Glance with the user's token, so an
// image the caller may not see (another project's private one) is
// ErrImageNotFound, which a create answers as a missing image.
type ImageCatalog interface {
	Image(ctx context.Context, creds identity.Credentials, id string) (Image, error)
}

// ImageCache is an ImageCatalog that may answer from records it read
// before (images.Store does: every create names its image, and reading
// it each time was a third of a create's etcd reads). Its answers carry
// the record's Key and ModRevision; when the create's store finds that
// record changed, the API calls ForgetImage and asks again.
type ImageCache interface {
	ImageCatalog
	// ForgetImage makes the next Image(id) read the image afresh.
	ForgetImage(id string)
}

// SetImages gives the API the image service servers are created from.
func (a *API) SetImages(c ImageCatalog) { a.images = c }
