// SPDX-License-Identifier: BSD-3-Clause
#include "transforms/decode/png_chunks.h"

#include <algorithm>
#include <cstring>

namespace ringloader::transforms {
namespace {

constexpr size_t kSignatureBytes = 8;
constexpr size_t kChunkHeaderBytes = 8;  // length, type
constexpr size_t kCrcBytes = 4;

uint32_t big_endian32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}

void append_chunk(std::vector<uint8_t>& out, const char* type, const uint8_t* payload,
                  uint32_t length) {
  const uint8_t header[kChunkHeaderBytes] = {
      static_cast<uint8_t>(length >> 24), static_cast<uint8_t>(length >> 16),
      static_cast<uint8_t>(length >> 8),  static_cast<uint8_t>(length),
      static_cast<uint8_t>(type[0]),      static_cast<uint8_t>(type[1]),
      static_cast<uint8_t>(type[2]),      static_cast<uint8_t>(type[3])};
  out.insert(out.end(), header, header + kChunkHeaderBytes);
  out.insert(out.end(), payload, payload + length);
  out.insert(out.end(), kCrcBytes, 0);  // stb_image does not check CRCs
}

}  // namespace

bool is_png(const uint8_t* data, size_t size) {
  return size >= kSignatureBytes && std::memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0;
}

PngHeader read_png_header(const uint8_t* data, size_t size) {
  // Signature, IHDR length and type, width, height, then depth and type.
  constexpr size_t kWidthOffset = kSignatureBytes + kChunkHeaderBytes;
  constexpr size_t kDepthOffset = kWidthOffset + 8;
  if (!is_png(data, size) || size < kDepthOffset + 2) return {};
  return {big_endian32(data + kWidthOffset), big_endian32(data + kWidthOffset + 4),
          data[kDepthOffset], data[kDepthOffset + 1]};
}

std::vector<uint8_t> close_truncated_png(const uint8_t* data, size_t size) {
  if (!is_png(data, size)) return {};
  size_t offset = kSignatureBytes;
  bool seen_image_data = false;
  while (offset + kChunkHeaderBytes <= size) {
    const uint32_t length = big_endian32(data + offset);
    const uint8_t* type = data + offset + 4;
    if (std::memcmp(type, "IEND", 4) == 0) return {};  // complete file
    const bool image_data = std::memcmp(type, "IDAT", 4) == 0;
    const size_t payload = offset + kChunkHeaderBytes;
    if (static_cast<uint64_t>(payload) + length + kCrcBytes > size) {
      if (!image_data) return {};  // cut inside metadata: PIL fails too
      std::vector<uint8_t> out(data, data + offset);
      const size_t present = std::min<size_t>(length, size - payload);
      // An empty IDAT would have stb memcpy into a null buffer (UB).
      if (present > 0) {
        append_chunk(out, "IDAT", data + payload, static_cast<uint32_t>(present));
      }
      append_chunk(out, "IEND", nullptr, 0);
      return out;
    }
    seen_image_data |= image_data;
    offset = payload + length + kCrcBytes;
  }
  if (!seen_image_data) return {};
  // Cut between chunks or inside a chunk header after the image data.
  std::vector<uint8_t> out(data, data + offset);
  append_chunk(out, "IEND", nullptr, 0);
  return out;
}

}  // namespace ringloader::transforms
