// SPDX-License-Identifier: BSD-3-Clause
// Memory a node shares read-only. The node region is a memfd the node maps
// read-write and then seals with F_SEAL_FUTURE_WRITE: from then on no
// process (a trainer reopening it through /proc included) can map it
// writable or write(2) it, while the node's own mapping stays writable.
// The node's ring cannot be sealed so (its workers map it writable), so
// trainers get a read-only reopen of it and its mode is 0600, which keeps
// a trainer of another uid (NodeOptions::allow_group) from reopening it
// read-write.
#pragma once

#include <cstddef>
#include <string>

#include "loader/ring/shared_region.h"

namespace ringloader::node {

// A mapping and its descriptor; unmapped and closed when it dies.
using Mapping = ring::SharedRegion;

// The node's region: zeroed, mapped read-write here, sealed against any
// other writable mapping and against resizing. Throws Error.
Mapping create_node_region(const std::string& name, size_t bytes);

// A new read-only descriptor of the same file (close-on-exec), for a peer.
// Throws Error.
int reopen_read_only(int fd);

// The trainer's side: maps `fd` (taken) read-only; it must be sealed
// against shrinking (or the node could SIGBUS us). Throws NodeError naming
// `what`.
Mapping map_read_only(int fd, const std::string& what);

// Like map_read_only, but MAP_PRIVATE and writable: `fd` stays a read-only
// descriptor, so a write lands in a private copy-on-write page of this
// process and never in the file, while a page never written keeps showing
// the file's current bytes. madvise(MADV_DONTNEED) on a range drops its
// private pages: the file shows through again. Throws NodeError naming
// `what`.
Mapping map_copy_on_write(int fd, const std::string& what);

}  // namespace ringloader::node
