// SPDX-License-Identifier: BSD-3-Clause
// Optional re-encoding of photos as ringloader-shard writes them, as FFCV's
// writer does (max_resolution, jpeg_quality): smaller files decode faster,
// since entropy decoding grows with the bytes. It changes the pixels the
// pipeline sees; docs/transforms.md gives the measured cost.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringloader::tools {

struct ReencodeOptions {
  // Photos whose longer side exceeds this are shrunk to it (PIL's
  // antialiased bilinear, aspect kept) and re-encoded. 0: no limit.
  int max_side = 0;
  // JPEG quality of re-encoded photos (4:2:0). With `reencode_all`, every
  // JPEG is re-encoded at this quality, shrunk or not.
  int quality = 90;
  bool reencode_all = false;

  bool active() const { return max_side > 0 || reencode_all; }
};

// Rewrites `bytes` in place when `options` ask for it; non-JPEG files and
// photos that need nothing are left as they are. Returns true if rewritten.
// Throws DecodeError naming `source` for a photo that does not decode.
bool reencode_photo(std::vector<uint8_t>& bytes, const std::string& source,
                    const ReencodeOptions& options);

}  // namespace ringloader::tools
