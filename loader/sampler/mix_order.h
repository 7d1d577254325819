// SPDX-License-Identifier: BSD-3-Clause
// The epoch order of a weighted mix of datasets (Mosaic Streaming's
// `choose` semantics): each stream contributes exactly `choose` samples per
// epoch, drawn as whole passes over it plus the head of one more pass, and
// the streams' sequences are interleaved. A pure function of
// (streams, shuffle, seed, epoch), like every other order.
#pragma once

#include <cstdint>
#include <vector>

namespace ringloader::sampler {

struct MixStream {
  int64_t size = 0;    // samples of this stream (indices follow the previous
                       // streams': the mix is their concatenation)
  int64_t choose = 0;  // samples it gives per epoch (may exceed size)
  // Tar streams: samples per shard; passes then follow the shard order +
  // shuffle buffer, so a stream is still read shard by shard.
  std::vector<int64_t> shard_sizes;
};

// Samples per epoch of a mix: the sum of `choose`.
int64_t mix_length(const std::vector<MixStream>& streams);

// Shuffled: each pass is the stream's own shuffled order keyed by (seed,
// epoch, stream, pass), the partial pass its head, and the streams are
// interleaved uniformly at random (so the whole order is a uniform random
// arrangement of the drawn multiset). Not shuffled: passes in index order,
// streams spread evenly (stream s's j-th sample at (j + 0.5) / choose_s).
void mix_order(const std::vector<MixStream>& streams, bool shuffle,
               int64_t shuffle_buffer, uint64_t seed, uint64_t epoch,
               std::vector<int64_t>& out);

// `choose` per stream from relative weights (Mosaic's `proportion`): the
// epoch has `epoch_size` samples (0: the streams' total size, Mosaic's
// default), split by the largest-remainder rule so the counts sum to it.
std::vector<int64_t> choose_from_weights(const std::vector<int64_t>& sizes,
                                         const std::vector<double>& weights,
                                         int64_t epoch_size);

}  // namespace ringloader::sampler
