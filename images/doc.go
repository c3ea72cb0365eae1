// Package images is Berth's image service: a Glance v2 subset, so that
// `openstack server create --image NAME` works and operators list, show,
// create and delete images with their own tools (`openstack image ...`,
// openstacksdk, gophercloud).
//
// In Berth an image is what a server runs. For the process driver that
// is a command, the image's berth_command property: a JSON list of
// strings, the program and its arguments, run without a shell
// (command.go). An image without it is one the fake driver boots: a name
// only. Berth stores no image data, so every image is active the moment
// it exists, its size and checksum are null, and an upload with data is
// refused (an empty one, which the CLI sends from a script, is taken).
//
// A reader finds:
//   - store.go: the images in etcd (etcdschema.Image under
//     Keys.Image(id)), created if the id is free, updated and deleted
//     over the revision read; catalog.go: Store as the compute API's
//     compute.ImageCatalog (and compute.ImageCache: cache.go keeps the
//     images creates read, each create comparing its record's revision
//     where it stores its servers), which resolves a server create's imageRef
//     as the caller sees images (another project's private one is not
//     found);
//   - defaults.go: berth-sleep and berth-fake, created at start-up with
//     fixed ids, as the default flavors are;
//   - api.go and versions.go: the HTTP API (the version documents at /
//     and /versions; GET/POST /v2/images, GET/PATCH/DELETE
//     /v2/images/{id}, PUT/GET /v2/images/{id}/file, GET
//     /v2/schemas/image); list.go: the list's filters, sorting and
//     paging; create.go and update.go: create and JSON-patch updates,
//     checked against Glance's own image schema (schema.go) with
//     python-jsonschema's words (internal/pycompat); view.go, errors.go
//     and pyjson.go: Glance's bodies, webob's error pages, json.dumps.
//
// Glance 25 (Zed) is the specification, read from its source: messages,
// status codes, list semantics (visibility, default sort created_at desc
// then id, marker paging with a next link whenever a page is full,
// unknown query parameters filtering on additional properties, never
// ignored). Where Berth differs, on purpose:
//   - creating, changing, uploading to and deleting images is for admins
//     only (Glance lets a project member manage its project's images): a
//     Berth image is a command every host may run;
//   - images are active at creation (Glance's are queued until data is
//     uploaded); there are no image members, tasks, imports, locations,
//     hidden images or stores; shared images are their owner's alone.
package images
