// SPDX-License-Identifier: BSD-3-Clause
#include "loader/ring/slot_validation.h"

#include <cstdio>
#include <cstring>

#include "ringloader/dataset.h"

#include "loader/ring/slot_protocol.h"

namespace ringloader::ring {
namespace {

// One load the compiler may not repeat: the value checked is the value used.
template <typename T>
T load_once(const T& word) {
  return __atomic_load_n(&word, __ATOMIC_RELAXED);
}

std::string violation(uint32_t slot, uint64_t batch_id, const std::string& field,
                      const std::string& value, const std::string& expected) {
  return "ring protocol violation: slot " + std::to_string(slot) + " (batch id " +
         std::to_string(batch_id) + ") has " + field + " = " + value + ", expected " +
         expected + "; a worker process wrote it";
}

// Length of the valid UTF-8 sequence at `s` (Python's rules: no overlong
// forms, no surrogates, nothing above U+10FFFF), or 0.
size_t utf8_sequence(const unsigned char* s, size_t left) {
  const unsigned char c = s[0];
  size_t length = 0;
  unsigned char low = 0x80, high = 0xbf;  // bounds of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    length = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    length = 3;
    if (c == 0xe0) low = 0xa0;
    if (c == 0xed) high = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    length = 4;
    if (c == 0xf0) low = 0x90;
    if (c == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (left < length || s[1] < low || s[1] > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if ((s[i] & 0xc0) != 0x80) return 0;
  }
  return length;
}

}  // namespace

std::string sanitize_text(const char* bytes, size_t capacity) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes);
  const size_t n = strnlen(bytes, capacity);
  std::string out;
  out.reserve(n);
  for (size_t i = 0; i < n;) {
    if (s[i] >= 0x80) {
      size_t length = utf8_sequence(s + i, n - i);
      if (length > 0) {
        out.append(bytes + i, length);
        i += length;
        continue;
      }
      out += '?';
    } else {
      out += (s[i] < 0x20 && s[i] != '\n' && s[i] != '\t') || s[i] == 0x7f
                 ? '?'
                 : static_cast<char>(s[i]);
    }
    ++i;
  }
  return out;
}

int32_t read_filler(const Ring& ring, uint32_t slot) {
  const int32_t filler = ring.slot(slot).filler.load(std::memory_order_relaxed);
  if (filler < 0 || static_cast<uint32_t>(filler) >= ring.geometry().worker_capacity) {
    return -1;
  }
  return filler;
}

bool SampleRange::holds(int64_t index) const {
  if (index >= 0 && index < dataset_size) return true;
  return is_shard_sample(index, static_cast<int64_t>(shards));
}

std::string SampleRange::text() const {
  std::string out = "[0, " + std::to_string(dataset_size) + ")";
  if (shards > 0) out += " or a sample of shard [0, " + std::to_string(shards) + ")";
  return out;
}

ReadySlot read_ready_slot(const Ring& ring, uint64_t batch_id, uint32_t expected_count,
                          const SampleRange& range) {
  const RingGeometry& geometry = ring.geometry();
  const uint32_t slot = slot_of(batch_id, geometry.slot_count);
  ReadySlot out;
  const uint32_t count = load_once(ring.slot(slot).sample_count);
  if (count != expected_count || count > geometry.batch_size) {
    out.violation = violation(slot, batch_id, "sample_count", std::to_string(count),
                              std::to_string(expected_count));
    return out;
  }
  // Copied first, checked after: the slot's words may change meanwhile.
  out.sample_indices.resize(count);
  std::memcpy(out.sample_indices.data(), ring.slot_sample_indices(slot),
              count * sizeof(int64_t));
  for (uint32_t i = 0; i < count; ++i) {
    const int64_t index = out.sample_indices[i];
    if (!range.holds(index)) {
      out.violation = violation(slot, batch_id, "sample index " + std::to_string(i),
                                std::to_string(index), range.text());
      out.sample_indices.clear();
      return out;
    }
  }
  out.sample_count = count;
  return out;
}

FailedSlot read_failed_slot(const Ring& ring, uint64_t batch_id) {
  const uint32_t slot_index = slot_of(batch_id, ring.geometry().slot_count);
  const SlotControl& slot = ring.slot(slot_index);
  FailedSlot out;
  const int32_t filler = slot.filler.load(std::memory_order_relaxed);
  out.filler = read_filler(ring, slot_index);
  if (filler != out.filler) {
    out.note = violation(slot_index, batch_id, "filler", std::to_string(filler),
                         "-1 or a worker index below " +
                             std::to_string(ring.geometry().worker_capacity));
  }
  const uint32_t kind = load_once(slot.error_kind);
  out.kind = kind <= static_cast<uint32_t>(ErrorKind::kOther) && kind != 0
                 ? static_cast<ErrorKind>(kind)
                 : ErrorKind::kOther;
  char text[kErrorTextBytes];
  std::memcpy(text, slot.error_text, sizeof text);
  // A worker always terminates its text; one that did not is cut here.
  out.text = sanitize_text(text, sizeof text - 1);
  return out;
}

std::string check_awaited_state(uint32_t slot_count, uint64_t batch_id, uint32_t state) {
  const uint32_t slot = slot_of(batch_id, slot_count);
  const uint32_t phase = state & kPhaseMask;
  const uint32_t awaited = static_cast<uint32_t>(batch_id / slot_count) & kGenerationMask;
  // Generations ahead of the awaited one, modulo the 2^29 wrap: ids within
  // half the wrap after batch_id count as ahead.
  const uint32_t ahead = ((state >> kPhaseBits) - awaited) & kGenerationMask;
  constexpr uint32_t kHalfWrap = (kGenerationMask >> 1) + 1;
  std::string expected;
  if (phase > kLeased) {
    expected = "a phase of 0 to 4";
  } else if (ahead != 0 && ahead < kHalfWrap) {
    expected = "a generation of at most " + std::to_string(awaited) +
               " (the slot cannot move past a batch the trainer has not taken)";
  } else if (ahead == 0 && phase == kLeased) {
    expected = "no LEASED phase for a batch the trainer has not taken";
  } else {
    return {};
  }
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%08x", state);
  return violation(slot, batch_id, "state", hex, expected);
}

std::string fit_error_text(const std::string& text) {
  constexpr size_t kFits = kErrorTextBytes - 1;
  if (text.size() <= kFits) return text;
  static const std::string kElided = " [...] ";
  auto continuation = [&](size_t i) { return (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80; };
  size_t head = (kFits - kElided.size()) / 3;
  while (head > 0 && continuation(head)) --head;
  size_t tail = text.size() - (kFits - kElided.size() - head);
  while (tail < text.size() && continuation(tail)) ++tail;
  return text.substr(0, head) + kElided + text.substr(tail);
}

}  // namespace ringloader::ring
