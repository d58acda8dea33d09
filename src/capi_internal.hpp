// What is behind the opaque store_t, for the C boundary and for tests that look inside.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "rmastore/store.h"
#include "store.hpp"

struct store_handle {
  std::mutex mutex;
  std::uint64_t magic = 0;
  std::unique_ptr<rmastore::internal::Store> impl;
};

namespace rmastore::internal {
// The store behind a live handle, or nullptr.
Store *impl(store_t s);
} // namespace rmastore::internal
