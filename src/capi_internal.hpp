// What is behind the opaque store_t, for the C boundary and for tests that look inside.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "rmastore/store.h"
#include "store.hpp"

struct store_handle {
  std::mutex mutex;
  // Live, finalized, or stopped by MPI_Finalize (capi.cpp).
  std::uint64_t magic = 0;
  std::unique_ptr<rmastore::internal::Store> impl;
  // The list of stores not finalized yet (capi.cpp): intrusive, so that joining it cannot fail.
  store_handle *live_next = nullptr;
};

namespace rmastore::internal {
// The store behind a live handle, or nullptr.
Store *impl(store_t s);
} // namespace rmastore::internal
