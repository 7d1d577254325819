// SPDX-License-Identifier: BSD-3-Clause
#include "loader/trainer/loader_access.h"

#include "loader/trainer/loader_impl.h"

namespace ringloader::internal {

int LoaderAccess::ring_fd(const Loader& loader) { return loader.impl_->ring().fd(); }

const uint8_t* LoaderAccess::ring_base(const Loader& loader) {
  return loader.impl_->ring().mapping();
}

size_t LoaderAccess::ring_bytes(const Loader& loader) { return loader.impl_->ring().bytes(); }

void LoaderAccess::wait_for_held_slots(Loader& loader) { loader.impl_->wait_for_held_slots(); }

}  // namespace ringloader::internal
