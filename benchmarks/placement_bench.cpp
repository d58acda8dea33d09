// placement_bench: what placement costs per key at large process counts, one process, no MPI.
// A new key's cache entry asks placement for its holders once (src/client/key_cache.cpp); issue 12's
// plan asks it for the first r + w of the key's ranking (holders, then witnesses). Both scan
// every live process, so they grow with p; this times them, with 64 processes per node, and
// counts, from the code of each scheme rather than from a run, the messages a key's first put
// sends:
//   today     - one to each of the r holders (write grant or lock) and one to every other
//               process (registration): r + p - 1 at most (fewer when the writer holds a copy);
//   witnesses - one to each distinct process among the first r + w of the ranking (issue 12's
//               plan: holders, then witnesses).
// Rows are JSON lines.
//   placement_bench [--replicas R] [--witnesses W] [--keys N]
#include <getopt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>
#include <vector>

#include "bench_util.hpp"
#include "common/placement.hpp"

using rmastore::bench::parse_int;
using rmastore::internal::Placement;

int main(int argc, char **argv) {
  int r = 2, w = 2, keys = 2000;
  static const option longopts[] = {{"replicas", required_argument, nullptr, 'r'},
                                    {"witnesses", required_argument, nullptr, 'w'},
                                    {"keys", required_argument, nullptr, 'k'},
                                    {"help", no_argument, nullptr, 'h'},
                                    {nullptr, 0, nullptr, 0}};
  const auto usage = [](int status) {
    std::fprintf(status == 0 ? stdout : stderr,
                 "usage: placement_bench [--replicas R>=1] [--witnesses W>=0] [--keys N>=1]\n");
    return status;
  };
  for (int c; (c = getopt_long(argc, argv, "h", longopts, nullptr)) != -1;) {
    const std::string v = optarg != nullptr ? optarg : "";
    const bool ok = c == 'r'   ? parse_int(v, r, 1)
                    : c == 'w' ? parse_int(v, w, 0)
                    : c == 'k' ? parse_int(v, keys, 1)
                               : false;
    if (!ok) return usage(c == 'h' ? 0 : 2);
  }
  for (int p : {64, 1024, 16384, 100000}) {
    std::vector<int> nodes(static_cast<std::size_t>(p));
    for (int i = 0; i < p; ++i) nodes[static_cast<std::size_t>(i)] = i / 64;
    const Placement pl(nodes, std::min(r, p));
    std::vector<int> out(static_cast<std::size_t>(std::min(r + w, p)));
    std::vector<int> hold(static_cast<std::size_t>(std::min(r, p)));
    std::set<int> distinct;
    const auto time_ns = [&](auto &&call) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < keys; ++k) call(static_cast<std::uint64_t>(k) * 0x9e3779b97f4a7c15ULL);
      return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / keys;
    };
    const double holders_ns = time_ns([&](std::uint64_t key) { pl.holders(key, hold); });
    std::size_t messaged = 0;
    const double ranking_ns = time_ns([&](std::uint64_t key) {
      pl.ranking(key, out);
      distinct.clear();
      for (int id : out)
        if (id >= 0) distinct.insert(id);
      messaged += distinct.size();
    });
    std::printf("{\"op\":\"placement\",\"p\":%d,\"nodes\":%d,\"replicas\":%d,\"witnesses\":%d,\"keys\":%d,"
                "\"holders_us\":%.2f,\"ranking_us\":%.2f,\"first_put_messages_today\":%d,"
                "\"first_put_messages_witnesses\":%.2f}\n",
                p, pl.nodes(), std::min(r, p), w, keys, holders_ns / 1000, ranking_ns / 1000, std::min(r, p) + p - 1,
                static_cast<double>(messaged) / keys);
  }
  return 0;
}
