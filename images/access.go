package images

import (
	"github.com/berth-project/berth/etcdschema"
	"github.com/berth-project/berth/identity"
)

// caller is who asks, as Glance's policy and its database's visibility
// rules see them.
type caller struct {
	admin   bool
	reader  bool   // holds a role on its project (reader is implied by all)
	project string // "" for a system-scoped or noauth caller
}

func callerOf(c identity.Credentials) caller {
	return caller{admin: c.HasRole("admin"), reader: c.HasRole("reader"), project: c.ProjectID}
}

func (c caller) owns(img *etcdschema.Image) bool {
	return c.project != "" && img.Owner != nil && *img.Owner == c.project
}

// sees is Glance's database visibility (_select_images_query) with its
// get_image rule: an admin sees every image; others see public and
// community images and their project's own. Shared images are their
// owner's alone: Berth keeps no image members.
func (c caller) sees(img *etcdschema.Image) bool {
	if c.admin {
		return true
	}
	if !c.reader {
		return false
	}
	return img.Visibility == VisibilityPublic || img.Visibility == VisibilityCommunity || c.owns(img)
}

// listed is sees narrowed as Glance lists without a visibility filter:
// community images only when they are the caller's own (an admin with
// no project sees none of them).
func (c caller) listed(img *etcdschema.Image) bool {
	if !c.sees(img) {
		return false
	}
	return img.Visibility != VisibilityCommunity || c.owns(img)
}
