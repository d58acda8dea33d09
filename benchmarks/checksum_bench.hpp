// checksum_bench: the functions of checksum_bench_impl.cpp, compiled at the build's flags (o2) and
// at -O3 (o3).
#pragma once

#include <cstdint>

#include "common/slot.hpp"

#ifndef CHECKSUM_BENCH_NS
#define CHECKSUM_BENCH_NS o2
#endif

namespace checksum_bench {

using rmastore::internal::kWriterBytes;
using rmastore::internal::kWriterOffset;
using rmastore::internal::SlotHeader;

#define CHECKSUM_BENCH_DECLARE                                                                                         \
  std::uint64_t hw_header(const SlotHeader &h);                                                                        \
  std::uint64_t hw_slot(const SlotHeader &h, const void *value);                                                       \
  std::uint64_t xxh3_header(const SlotHeader &h);                                                                      \
  std::uint64_t xxh3_seed_slot(const SlotHeader &h, const void *value);                                                \
  std::uint64_t xxh3_fold_slot(const SlotHeader &h, const void *value);

namespace o2 {
CHECKSUM_BENCH_DECLARE
} // namespace o2
namespace o3 {
CHECKSUM_BENCH_DECLARE
} // namespace o3

} // namespace checksum_bench
