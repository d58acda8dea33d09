// checksum_bench: the slot checksum (src/common/slot.cpp) against xxHash (libxxhash, Debian 0.8.1), one
// process, no MPI. Issue 11: use xxHash if it is at least as fast on the put path.
//
// What a put hashes (src/store/store.cpp, Store::write_copies): a value of up to kInPlaceLimit (16 KiB)
// goes out in place, with slot_checksum over the writer's part of the header (48 bytes) and the
// value; a larger value is double-buffered and only its two headers are hashed (two
// header_checksum calls), never the value. A get hashes the same, with one header for large values.
//
// Ops:
//   put  - the checksum work of one put of that length (as above);
//   slot - slot_checksum over header and value at any length: the raw speed over the value,
//          also at sizes the store does not hash.
// Variants, each the pair (header checksum, slot checksum):
//   store               - what src/common/slot.cpp has now, called from rmastore_internal;
//   handwritten(_o3)    - the hand-written XXH64-style checksum slot.cpp had before issue 11,
//                         copied into checksum_bench_impl.cpp, compiled at the build's flags (-O2
//                         in RelWithDebInfo) and at -O3;
//   xxh64_lib           - XXH64(value, seed = XXH64(header));
//   xxh3_seed_lib       - XXH3_64bits_withSeed(value, seed = XXH3_64bits(header));
//   xxh3_fold_lib       - XXH3_64bits(header with the checksum field = XXH3_64bits(value));
//   xxh3_stream_lib     - one XXH3 state: update(header), update(value), digest;
//     (*_lib: calls into libxxhash.so, Debian's build: -O2, SSE2)
//   xxh3_seed_avx, xxh3_fold_avx - the same through the library's runtime-dispatched entry points
//                         (XXH3_*_dispatch: AVX2 / AVX-512 if the CPU has them), x86-64 only, each
//                         call followed by a vzeroupper (see below);
//   xxh3_seed_inline(_o3), xxh3_fold_inline(_o3) - compiled from xxhash.h (XXH_INLINE_ALL) into
//                         out-of-line functions, as slot.cpp would have them, at -O2 and at -O3.
// Every variant covers every header field the hand-written checksum covers (key .. flags, with
// the checksum field taken as 0). Calls go through function pointers: none is inlined into the
// loop.
//
// Timing: per (op, size), `rounds` rounds; in each round every variant (in rotating order, so
// that load on a shared machine falls on all alike) times one batch of calls (~4 MiB hashed, at
// least 16 calls). The header's version changes on every call, as a put's does. Reported: the
// median and the minimum over rounds of ns per call, and GB/s (hashed bytes / median ns). The
// value stays in cache (it is reused), as a value a put has just written would be.
// Output: one JSON object per line (stdout).
//
//   checksum_bench [--sizes 8,64,1K,16K,64K,1M] [--ops put,slot] [--rounds 31] [--variants a,b]

// XXH3_state_t on the stack; the dispatch header must not rename the plain entry points.
#define XXH_STATIC_LINKING_ONLY
#define XXH_DISPATCH_DISABLE_REPLACE
#include <getopt.h>

#include <xxhash.h>
#ifdef CHECKSUM_BENCH_DISPATCH
#include <immintrin.h>
#include <xxh_x86dispatch.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "checksum_bench.hpp"
#include "common/slot.hpp"

using rmastore::internal::kHeaderBytes;
using rmastore::internal::kWriterBytes;
using rmastore::internal::kWriterOffset;
using rmastore::internal::SlotHeader;

namespace {

// The writer's part of the header with the checksum field 0: what header_checksum covers.
struct WriterPart {
  unsigned char b[kWriterBytes];
};
WriterPart writer_part(const SlotHeader &h) {
  SlotHeader c = h;
  c.checksum = 0;
  WriterPart w;
  std::memcpy(w.b, reinterpret_cast<const unsigned char *>(&c) + kWriterOffset, kWriterBytes);
  return w;
}

// Through the shared library (libxxhash.so.0, Debian's build: -O2, SSE2).
std::uint64_t xxh64_header(const SlotHeader &h) {
  const WriterPart w = writer_part(h);
  return XXH64(w.b, kWriterBytes, 0x5eed);
}
std::uint64_t xxh64_slot(const SlotHeader &h, const void *value) {
  return XXH64(value, static_cast<std::size_t>(h.length), xxh64_header(h));
}
std::uint64_t xxh3_header(const SlotHeader &h) {
  const WriterPart w = writer_part(h);
  return XXH3_64bits(w.b, kWriterBytes);
}
std::uint64_t xxh3_seed_slot(const SlotHeader &h, const void *value) {
  return XXH3_64bits_withSeed(value, static_cast<std::size_t>(h.length), xxh3_header(h));
}
std::uint64_t xxh3_fold_slot(const SlotHeader &h, const void *value) {
  SlotHeader c = h;
  c.checksum = XXH3_64bits(value, static_cast<std::size_t>(h.length));
  return XXH3_64bits(reinterpret_cast<const unsigned char *>(&c) + kWriterOffset, kWriterBytes);
}
std::uint64_t xxh3_stream_slot(const SlotHeader &h, const void *value) {
  const WriterPart w = writer_part(h);
  XXH3_state_t s;
  XXH3_INITSTATE(&s);
  XXH3_64bits_reset(&s);
  XXH3_64bits_update(&s, w.b, kWriterBytes);
  XXH3_64bits_update(&s, value, static_cast<std::size_t>(h.length));
  return XXH3_64bits_digest(&s);
}

#ifdef CHECKSUM_BENCH_DISPATCH
// The library's runtime-dispatched entry points (AVX2 / AVX-512). Debian's 0.8.1 returns from
// them with the upper halves of the vector registers dirty: every legacy-SSE instruction the
// process runs afterwards (its own code, any library's) is then several times slower, until a
// vzeroupper. Measured here with the vzeroupper a caller would have to add.
__attribute__((target("avx"))) void zero_upper() {
  _mm256_zeroupper();
}
const bool g_avx = __builtin_cpu_supports("avx");
std::uint64_t xxh3_avx_header(const SlotHeader &h) {
  const WriterPart w = writer_part(h);
  const std::uint64_t r = XXH3_64bits_dispatch(w.b, kWriterBytes);
  if (g_avx) zero_upper();
  return r;
}
std::uint64_t xxh3_seed_avx_slot(const SlotHeader &h, const void *value) {
  const WriterPart w = writer_part(h);
  const std::uint64_t r =
      XXH3_64bits_withSeed_dispatch(value, static_cast<std::size_t>(h.length), XXH3_64bits_dispatch(w.b, kWriterBytes));
  if (g_avx) zero_upper();
  return r;
}
std::uint64_t xxh3_fold_avx_slot(const SlotHeader &h, const void *value) {
  SlotHeader c = h;
  c.checksum = XXH3_64bits_dispatch(value, static_cast<std::size_t>(h.length));
  const std::uint64_t r =
      XXH3_64bits_dispatch(reinterpret_cast<const unsigned char *>(&c) + kWriterOffset, kWriterBytes);
  if (g_avx) zero_upper();
  return r;
}
#endif

struct Variant {
  const char *name;
  std::uint64_t (*header)(const SlotHeader &);
  std::uint64_t (*slot)(const SlotHeader &, const void *);
};

namespace cb = checksum_bench;
const Variant kVariants[] = {
    {"store", rmastore::internal::header_checksum, rmastore::internal::slot_checksum},
    {"handwritten", cb::o2::hw_header, cb::o2::hw_slot},
    {"handwritten_o3", cb::o3::hw_header, cb::o3::hw_slot},
    {"xxh64_lib", xxh64_header, xxh64_slot},
    {"xxh3_seed_lib", xxh3_header, xxh3_seed_slot},
    {"xxh3_fold_lib", xxh3_header, xxh3_fold_slot},
    {"xxh3_stream_lib", xxh3_header, xxh3_stream_slot},
#ifdef CHECKSUM_BENCH_DISPATCH
    {"xxh3_seed_avx", xxh3_avx_header, xxh3_seed_avx_slot},
    {"xxh3_fold_avx", xxh3_avx_header, xxh3_fold_avx_slot},
#endif
    {"xxh3_seed_inline", cb::o2::xxh3_header, cb::o2::xxh3_seed_slot},
    {"xxh3_fold_inline", cb::o2::xxh3_header, cb::o2::xxh3_fold_slot},
    {"xxh3_seed_inline_o3", cb::o3::xxh3_header, cb::o3::xxh3_seed_slot},
    {"xxh3_fold_inline_o3", cb::o3::xxh3_header, cb::o3::xxh3_fold_slot},
};

volatile std::uint64_t g_sink;

// ns per call of one batch of `iters` calls.
double time_batch(const Variant &v, bool put, SlotHeader h, const unsigned char *value, std::size_t iters) {
  std::uint64_t acc = 0;
  const bool in_place = rmastore::internal::in_place(h.length);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < iters; ++i) {
    h.version = i + 1;
    if (!put || in_place) {
      acc += v.slot(h, value);
    } else {
      // Double-buffered: the two headers, with and without kFlagHalfB.
      SlotHeader hb = h;
      hb.flags |= rmastore::internal::kFlagHalfB;
      acc += v.header(h) ^ v.header(hb);
    }
  }
  const auto t1 = std::chrono::steady_clock::now();
  g_sink = acc;
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(iters);
}

std::string loadavg() {
  std::ifstream f("/proc/loadavg");
  std::string s;
  std::getline(f, s);
  return s;
}

} // namespace

int main(int argc, char **argv) {
  using namespace rmastore::bench;
  const char *usage = "usage: checksum_bench [--sizes 8,64,1K,16K,64K,1M] [--ops put,slot] [--rounds N] "
                      "[--variants current,xxh3_seed,...]\n";
  std::vector<std::string> size_names = split("8,64,1K,16K,64K,1M");
  std::vector<std::string> ops{"put", "slot"};
  std::vector<std::string> names;
  for (const Variant &v : kVariants) names.push_back(v.name);
  int rounds = 31;
  const option longopts[] = {{"sizes", required_argument, nullptr, 's'},  {"ops", required_argument, nullptr, 'o'},
                             {"rounds", required_argument, nullptr, 'r'}, {"variants", required_argument, nullptr, 'v'},
                             {"help", no_argument, nullptr, 'h'},         {nullptr, 0, nullptr, 0}};
  for (int c; (c = getopt_long(argc, argv, "h", longopts, nullptr)) != -1;) {
    switch (c) {
    case 's':
      size_names = split(optarg);
      break;
    case 'o':
      ops = split(optarg);
      break;
    case 'v':
      names = split(optarg);
      break;
    case 'r':
      if (!parse_int(optarg, rounds, 1)) {
        std::fprintf(stderr, "checksum_bench: --rounds wants a whole number >= 1, not '%s'\n%s", optarg, usage);
        return 2;
      }
      break;
    case 'h':
      std::fputs(usage, stdout);
      return 0;
    default:
      std::fputs(usage, stderr);
      return 2; // getopt_long said what is wrong
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "checksum_bench: unexpected argument '%s'\n%s", argv[optind], usage);
    return 2;
  }
  std::vector<std::size_t> sizes;
  for (const std::string &n : size_names) {
    std::size_t v = 0;
    if (!parse_size(n, v)) {
      std::fprintf(stderr, "checksum_bench: not a size: '%s'\n%s", n.c_str(), usage);
      return 2;
    }
    sizes.push_back(v);
  }
  if (sizes.empty() || ops.empty()) {
    std::fputs(usage, stderr);
    return 2;
  }
  std::vector<const Variant *> vars;
  for (const auto &n : names) {
    const Variant *found = nullptr;
    for (const Variant &v : kVariants) {
      if (n == v.name) found = &v;
    }
    if (found == nullptr) {
      std::fprintf(stderr, "checksum_bench: unknown variant %s\n", n.c_str());
      return 2;
    }
    vars.push_back(found);
  }
  std::printf("{\"bench\":\"checksum\",\"xxhash\":\"%u\",\"rounds\":%d,\"loadavg_start\":\"%s\"}\n",
              XXH_versionNumber(), rounds, loadavg().c_str());

  std::size_t max_size = 0;
  for (std::size_t s : sizes) max_size = std::max(max_size, s);
  std::vector<unsigned char> value(max_size + 1);
  for (std::size_t i = 0; i < value.size(); ++i) value[i] = static_cast<unsigned char>(i * 131 + 7);

  for (const auto &op : ops) {
    const bool put = op == "put";
    for (std::size_t len : sizes) {
      SlotHeader h{};
      h.capacity = len;
      h.key = 0x1234567890abcdefULL;
      h.length = len;
      h.epoch = 3;
      h.writer = 1;
      h.flags = rmastore::internal::make_flags(0, rmastore::internal::Ns::kValue);
      const std::size_t hashed = put && !rmastore::internal::in_place(len) ? 2 * kWriterBytes : kWriterBytes + len;
      const std::size_t iters = std::max<std::size_t>(16, (std::size_t{4} << 20) / (hashed + kHeaderBytes));
      for (const Variant *v : vars) time_batch(*v, put, h, value.data(), iters); // warm-up
      std::vector<std::vector<double>> ns(vars.size());
      for (int r = 0; r < rounds; ++r) {
        for (std::size_t k = 0; k < vars.size(); ++k) {
          const std::size_t j = (k + static_cast<std::size_t>(r)) % vars.size();
          ns[j].push_back(time_batch(*vars[j], put, h, value.data(), iters));
        }
      }
      for (std::size_t j = 0; j < vars.size(); ++j) {
        const double med = stats(ns[j]).median;
        const double mn = *std::min_element(ns[j].begin(), ns[j].end());
        std::printf("{\"op\":\"%s\",\"variant\":\"%s\",\"size\":%zu,\"hashed_bytes\":%zu,\"calls\":%zu,"
                    "\"median_ns\":%.2f,\"min_ns\":%.2f,\"gbps\":%.3f}\n",
                    op.c_str(), vars[j]->name, len, hashed, iters, med, mn, static_cast<double>(hashed) / med);
      }
      std::fflush(stdout);
    }
  }
  std::printf("{\"bench\":\"checksum\",\"loadavg_end\":\"%s\"}\n", loadavg().c_str());
  return 0;
}
