package images

import "github.com/berth-project/berth/internal/pycompat"

// imageSchemaJSON is Glance 25's (Zed's) image schema as its API checks a
// create with it and serves it at /v2/schemas/image: get_base_properties()
// with the default disk and container formats, merged with the
// properties of the schema-image.json Glance ships (each marked is_base
// false, as load_custom_properties leaves them), additional properties
// allowed as strings (allow_additional_image_properties). Member order
// is the Python dicts' (python-jsonschema checks, and words its errors,
// in that order). Transcribed from Glance 25.1.0's
// glance/api/v2/images.py (get_base_properties, get_schema) and
// etc/schema-image.json.
const imageSchemaJSON = `{
 "name": "image",
 "properties": {
  "id": {
   "type": "string",
   "description": "An identifier for the image",
   "pattern": "^([0-9a-fA-F]){8}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){12}$"
  },
  "name": {
   "type": [
    "null",
    "string"
   ],
   "description": "Descriptive name for the image",
   "maxLength": 255
  },
  "status": {
   "type": "string",
   "readOnly": true,
   "description": "Status of the image",
   "enum": [
    "queued",
    "saving",
    "active",
    "killed",
    "deleted",
    "uploading",
    "importing",
    "pending_delete",
    "deactivated"
   ]
  },
  "visibility": {
   "type": "string",
   "description": "Scope of image accessibility",
   "enum": [
    "community",
    "public",
    "private",
    "shared"
   ]
  },
  "protected": {
   "type": "boolean",
   "description": "If true, image will not be deletable."
  },
  "os_hidden": {
   "type": "boolean",
   "description": "If true, image will not appear in default image list response."
  },
  "checksum": {
   "type": [
    "null",
    "string"
   ],
   "readOnly": true,
   "description": "md5 hash of image contents.",
   "maxLength": 32
  },
  "os_hash_algo": {
   "type": [
    "null",
    "string"
   ],
   "readOnly": true,
   "description": "Algorithm to calculate the os_hash_value",
   "maxLength": 64
  },
  "os_hash_value": {
   "type": [
    "null",
    "string"
   ],
   "readOnly": true,
   "description": "Hexdigest of the image contents using the algorithm specified by the os_hash_algo",
   "maxLength": 128
  },
  "owner": {
   "type": [
    "null",
    "string"
   ],
   "description": "Owner of the image",
   "maxLength": 255
  },
  "size": {
   "type": [
    "null",
    "integer"
   ],
   "readOnly": true,
   "description": "Size of image file in bytes"
  },
  "virtual_size": {
   "type": [
    "null",
    "integer"
   ],
   "readOnly": true,
   "description": "Virtual size of image in bytes"
  },
  "container_format": {
   "type": [
    "null",
    "string"
   ],
   "description": "Format of the container",
   "enum": [
    null,
    "ami",
    "ari",
    "aki",
    "bare",
    "ovf",
    "ova",
    "docker",
    "compressed"
   ]
  },
  "disk_format": {
   "type": [
    "null",
    "string"
   ],
   "description": "Format of the disk",
   "enum": [
    null,
    "ami",
    "ari",
    "aki",
    "vhd",
    "vhdx",
    "vmdk",
    "raw",
    "qcow2",
    "vdi",
    "iso",
    "ploop"
   ]
  },
  "created_at": {
   "type": "string",
   "readOnly": true,
   "description": "Date and time of image registration"
  },
  "updated_at": {
   "type": "string",
   "readOnly": true,
   "description": "Date and time of the last image modification"
  },
  "tags": {
   "type": "array",
   "description": "List of strings related to the image",
   "items": {
    "type": "string",
    "maxLength": 255
   }
  },
  "direct_url": {
   "type": "string",
   "readOnly": true,
   "description": "URL to access the image file kept in external store"
  },
  "min_ram": {
   "type": "integer",
   "description": "Amount of ram (in MB) required to boot image."
  },
  "min_disk": {
   "type": "integer",
   "description": "Amount of disk space (in GB) required to boot image."
  },
  "self": {
   "type": "string",
   "readOnly": true,
   "description": "An image self url"
  },
  "file": {
   "type": "string",
   "readOnly": true,
   "description": "An image file url"
  },
  "stores": {
   "type": "string",
   "readOnly": true,
   "description": "Store in which image data resides.  Only present when the operator has enabled multiple stores.  May be a comma-separated list of store identifiers."
  },
  "schema": {
   "type": "string",
   "readOnly": true,
   "description": "An image schema url"
  },
  "locations": {
   "type": "array",
   "items": {
    "type": "object",
    "properties": {
     "url": {
      "type": "string",
      "maxLength": 255
     },
     "metadata": {
      "type": "object"
     },
     "validation_data": {
      "description": "Values to be used to populate the corresponding image properties. If the image status is not 'queued', values must exactly match those already contained in the image properties.",
      "type": "object",
      "writeOnly": true,
      "additionalProperties": false,
      "properties": {
       "checksum": {
        "type": "string",
        "minLength": 32,
        "maxLength": 32
       },
       "os_hash_algo": {
        "type": "string",
        "maxLength": 64
       },
       "os_hash_value": {
        "type": "string",
        "maxLength": 128
       }
      },
      "required": [
       "os_hash_algo",
       "os_hash_value"
      ]
     }
    },
    "required": [
     "url",
     "metadata"
    ]
   },
   "description": "A set of URLs to access the image file kept in external store"
  },
  "kernel_id": {
   "type": [
    "null",
    "string"
   ],
   "pattern": "^([0-9a-fA-F]){8}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){12}$",
   "description": "ID of image stored in Glance that should be used as the kernel when booting an AMI-style image.",
   "is_base": false
  },
  "ramdisk_id": {
   "type": [
    "null",
    "string"
   ],
   "pattern": "^([0-9a-fA-F]){8}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){4}-([0-9a-fA-F]){12}$",
   "description": "ID of image stored in Glance that should be used as the ramdisk when booting an AMI-style image.",
   "is_base": false
  },
  "instance_uuid": {
   "type": "string",
   "description": "Metadata which can be used to record which instance this image is associated with. (Informational only, does not create an instance snapshot.)",
   "is_base": false
  },
  "architecture": {
   "description": "Operating system architecture as specified in https://docs.openstack.org/python-glanceclient/latest/cli/property-keys.html",
   "type": "string",
   "is_base": false
  },
  "os_distro": {
   "description": "Common name of operating system distribution as specified in https://docs.openstack.org/python-glanceclient/latest/cli/property-keys.html",
   "type": "string",
   "is_base": false
  },
  "os_version": {
   "description": "Operating system version as specified by the distributor.",
   "type": "string",
   "is_base": false
  },
  "description": {
   "description": "A human-readable string describing this image.",
   "type": "string",
   "is_base": false
  },
  "cinder_encryption_key_id": {
   "description": "Identifier in the OpenStack Key Management Service for the encryption key for the Block Storage Service to use when mounting a volume created from this image",
   "type": "string",
   "is_base": false
  },
  "cinder_encryption_key_deletion_policy": {
   "description": "States the condition under which the Image Service will delete the object associated with the 'cinder_encryption_key_id' image property.  If this property is missing, the Image Service will take no action",
   "type": "string",
   "enum": [
    "on_image_deletion",
    "do_not_delete"
   ],
   "is_base": false
  }
 },
 "additionalProperties": {
  "type": "string"
 },
 "links": [
  {
   "rel": "self",
   "href": "{self}"
  },
  {
   "rel": "enclosure",
   "href": "{file}"
  },
  {
   "rel": "describedby",
   "href": "{schema}"
  }
 ]
}`

// imageSchema is imageSchemaJSON parsed.
var imageSchema = pycompat.MustSchema(imageSchemaJSON)
