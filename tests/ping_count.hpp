// Pings of STORE_DETECTOR_PING sent by this process (tests/ping_count.cpp; only in executables
// that link it).
#pragma once

#include <cstdint>

namespace rmastore::test {
std::uint64_t pings_sent();
} // namespace rmastore::test
