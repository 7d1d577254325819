// SPDX-License-Identifier: BSD-3-Clause
// Whether a file may decide which commands this process runs. A shard index
// that lists pipe: shards names shell commands, and the dataset it came
// with is untrusted input (docs/security.md): its commands run only when the
// file is as trustworthy as the caller's own arguments, the rule ssh applies
// to its configuration and authorized_keys files.
#pragma once

#include <string>

namespace ringloader::data {

// "" when the file open at `fd` is trusted: a
// regular file owned by this process's effective uid or by root, writable
// by neither its group nor others, in folders (each one up to /) that are
// owned by this uid or root and writable by no one else unless sticky (as
// /tmp: others may not rename or remove what is not theirs there).
// Otherwise the reason, e.g. "it is writable by its group (mode 0664)".
std::string why_file_is_untrusted(int fd);

}  // namespace ringloader::data
