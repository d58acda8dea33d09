// The monotonic clock every bounded wait and timing of the store reads.
#pragma once

#include <cstdint>

#include <time.h>

namespace rmastore::internal {

inline std::int64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

} // namespace rmastore::internal
