package etcdschema

import "time"

// ImageVersion is the version of the Image value.
const ImageVersion = 1

// Image is an image of the image service (package images, Berth's Glance
// v2 subset): what a server runs. For the process driver that is Command,
// the argv the agent executes; an image without a command is one the fake
// driver boots by name. Berth stores no image data, so Glance's size,
// checksum and hashes have no field: they are always null.
//
// Name, Owner and the two formats are pointers because Glance lets each
// be null, which its API shows as null rather than "".
type Image struct {
	header
	ID              string  `json:"id"`
	Name            *string `json:"name"`
	Status          string  `json:"status"`
	Visibility      string  `json:"visibility"`
	Owner           *string `json:"owner"`
	DiskFormat      *string `json:"disk_format"`
	ContainerFormat *string `json:"container_format"`
	MinRAMMB        int     `json:"min_ram"`
	MinDiskGB       int     `json:"min_disk"`
	Protected       bool    `json:"protected"`
	// Command is the image's berth_command property, parsed: argv[0]
	// and its arguments, run without a shell. Empty for a fake image.
	Command []string `json:"command,omitempty"`
	Tags    []string `json:"tags,omitempty"`
	// Properties are Glance's additional properties (strings), apart
	// from berth_command, which is Command.
	Properties map[string]string `json:"properties,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
	UpdatedAt  time.Time         `json:"updated_at"`
}

func (*Image) SchemaVersion() int { return ImageVersion }
