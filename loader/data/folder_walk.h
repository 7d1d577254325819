// SPDX-License-Identifier: BSD-3-Clause
// Opening a folder by a path that passes through folders other users may
// write (/tmp, a shared scratch disk) without letting them choose where the
// path leads: each component is opened relative to the folder before it
// with O_NOFOLLOW, so what is checked is what is opened (no window between
// a check by name and the open), and a symlink on the way is followed only
// when it is this process's own or root's.
#pragma once

#include <sys/types.h>

#include <string>

namespace ringloader::data {

// Opens `dir` (absolute, or relative to the working directory) and returns
// its descriptor (O_DIRECTORY | O_CLOEXEC; the caller closes it). Missing
// components are created when `create` is set: parents 0755, the last one
// 0700. Every folder the walk passes through, the last included, must be
// owned by this process's effective uid or root and be writable by no one
// else unless it is sticky (as /tmp). Throws IoError "<what> <dir>: <why>",
// the why naming the offending component: a symlink another user owns, a
// folder another user owns or may write, a component that is not a folder,
// too many symlinks.
int open_folder_walking(const std::string& dir, bool create, const std::string& what);

}  // namespace ringloader::data
