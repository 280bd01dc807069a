// Package ociimage writes container images as OCI image-layout tar files
// using only the standard library, so images can be made from the project's
// binaries without a registry or a container builder and imported with
// `ctr images import`.
//
// An Image is a name, a runtime configuration and layers; a layer is a typed
// list of entries (files, directories, symlinks). Output is deterministic:
// entries are sorted, timestamps and owners' names are fixed, and gzip
// carries no time, so the same inputs always give the same digests.
package ociimage
