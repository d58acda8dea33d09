// checksum_bench: the functions compiled from source, as src/common/slot.cpp would have them. Compiled
// twice: here with the build's flags (RelWithDebInfo: -O2), and as checksum_bench_impl_o3.cpp with
// -O3 (xxHash 0.8.1's SSE2 code is much slower at -O2 with GCC 12). A translation unit of its own:
// the inlined xxHash (XXH_INLINE_ALL) must not meet the library's declarations in
// checksum_bench.cpp.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "checksum_bench.hpp"

namespace checksum_bench::CHECKSUM_BENCH_NS {
namespace {

// The hand-written checksum of src/common/slot.cpp before issue 11, verbatim, so that it stays
// measurable whatever slot.cpp uses.
constexpr std::uint64_t kP1 = 0x9E3779B185EBCA87ULL;
constexpr std::uint64_t kP2 = 0xC2B2AE3D27D4EB4FULL;
constexpr std::uint64_t kP3 = 0x165667B19E3779F9ULL;

inline std::uint64_t load64(const unsigned char *p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline std::uint64_t lane(std::uint64_t acc, std::uint64_t word) {
  return std::rotl(acc + word * kP2, 31) * kP1;
}

inline std::uint64_t avalanche(std::uint64_t h) {
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP3;
  h ^= h >> 32;
  return h;
}

std::uint64_t checksum64(const void *data, std::size_t len, std::uint64_t seed) {
  const auto *p = static_cast<const unsigned char *>(data);
  std::uint64_t h;
  std::size_t i = 0;
  if (len >= 32) {
    std::uint64_t a = seed + kP1 + kP2, b = seed + kP2, c = seed, d = seed - kP1;
    for (; i + 32 <= len; i += 32) {
      a = lane(a, load64(p + i));
      b = lane(b, load64(p + i + 8));
      c = lane(c, load64(p + i + 16));
      d = lane(d, load64(p + i + 24));
    }
    h = std::rotl(a, 1) + std::rotl(b, 7) + std::rotl(c, 12) + std::rotl(d, 18);
    for (std::uint64_t v : {a, b, c, d}) h = (h ^ lane(0, v)) * kP1 + kP3;
  } else {
    h = seed + kP3;
  }
  h += len;
  for (; i + 8 <= len; i += 8) h = std::rotl(h ^ lane(0, load64(p + i)), 27) * kP1 + kP3;
  for (; i < len; ++i) h = std::rotl(h ^ (p[i] * kP3), 11) * kP1;
  return avalanche(h);
}

const unsigned char *writer_part(const SlotHeader &h) {
  return reinterpret_cast<const unsigned char *>(&h) + kWriterOffset;
}

} // namespace

std::uint64_t hw_header(const SlotHeader &h) {
  SlotHeader c = h;
  c.checksum = 0;
  return checksum64(writer_part(c), kWriterBytes, 0x5eed);
}

std::uint64_t hw_slot(const SlotHeader &h, const void *value) {
  return checksum64(value, static_cast<std::size_t>(h.length), hw_header(h));
}

std::uint64_t xxh3_header(const SlotHeader &h) {
  SlotHeader c = h;
  c.checksum = 0;
  return XXH3_64bits(writer_part(c), kWriterBytes);
}

std::uint64_t xxh3_seed_slot(const SlotHeader &h, const void *value) {
  return XXH3_64bits_withSeed(value, static_cast<std::size_t>(h.length), xxh3_header(h));
}

std::uint64_t xxh3_fold_slot(const SlotHeader &h, const void *value) {
  SlotHeader c = h;
  c.checksum = XXH3_64bits(value, static_cast<std::size_t>(h.length));
  return XXH3_64bits(writer_part(c), kWriterBytes);
}

} // namespace checksum_bench::CHECKSUM_BENCH_NS
