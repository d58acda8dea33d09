// Shared by the benchmarks: time, option parsing, where a key's copies are, and latency
// statistics. Like the benchmarks, it uses only the installed headers.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "rmastore/store.h"
#include "rmastore/store_hooks.h"

namespace rmastore::bench {

inline double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "8,4K,1M" -> {"8", "4K", "1M"}
inline std::vector<std::string> split(const std::string &s) {
  std::vector<std::string> out;
  std::size_t a = 0;
  while (a <= s.size()) {
    std::size_t b = s.find(',', a);
    if (b == std::string::npos) b = s.size();
    if (b > a) out.push_back(s.substr(a, b - a));
    a = b + 1;
  }
  return out;
}

// "4K" -> 4096; K, M and G suffixes (powers of 1024).
inline std::size_t parse_size(const std::string &s) {
  char *end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return static_cast<std::size_t>(v);
}

// The ranks (in the store's communicator) of the processes holding the copies of `key`, best
// first: the test hook of rmastore/store_hooks.h. Aborts the job if the hook fails.
inline std::vector<int> key_holders(store_t s, store_key_t key) {
  int n = 0;
  store_status_t st = store_key_holders(s, key, nullptr, 0, &n);
  std::vector<int> ranks(static_cast<std::size_t>(n > 0 ? n : 0));
  if (st == STORE_ERR_TRUNCATED) st = store_key_holders(s, key, ranks.data(), n, &n);
  if (st != STORE_OK || static_cast<std::size_t>(n) != ranks.size()) {
    std::fprintf(stderr, "store_key_holders: %s\n", store_strerror(st));
    MPI_Abort(MPI_COMM_WORLD, 12);
  }
  return ranks;
}

// This process's view of a store: its size, rank and replicas. Aborts the job on failure.
inline store_info_t info_of(store_t s) {
  store_info_t info;
  store_info_init(&info);
  const store_status_t st = store_get_info(s, &info);
  if (st != STORE_OK) {
    std::fprintf(stderr, "store_get_info: %s\n", store_strerror(st));
    MPI_Abort(MPI_COMM_WORLD, 12);
  }
  return info;
}

struct Stats {
  double median = 0, p99 = 0;
};

// Median and 99th percentile (nearest rank) of the samples.
inline Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.median = v[v.size() / 2];
  const auto rank = static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(v.size())));
  s.p99 = v[std::min(v.size(), std::max<std::size_t>(rank, 1)) - 1];
  return s;
}

} // namespace rmastore::bench
