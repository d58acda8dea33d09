// Shared by the benchmarks: time, option parsing, where a key's copies are, the raw MPI window of
// the baselines, and latency statistics. Like the benchmarks, it uses only the installed headers.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
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

// "4K" -> 4096: a number with an optional K, M or G suffix (powers of 1024). False if `s` is not
// one.
inline bool parse_size(const std::string &s, std::size_t &out) {
  if (s.empty() || !(std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '.')) return false;
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno != 0) return false;
  const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(*end)));
  if (unit == 'K' || unit == 'M' || unit == 'G') {
    v *= unit == 'K' ? 1024.0 : unit == 'M' ? 1024.0 * 1024 : 1024.0 * 1024 * 1024;
    ++end;
  }
  if (*end != '\0' || !(v >= 0 && v < 0x1p63)) return false;
  out = static_cast<std::size_t>(v);
  return true;
}

// A decimal integer of at least `min`. False if `s` is not one.
inline bool parse_int(const std::string &s, int &out, int min = INT_MIN) {
  if (s.empty()) return false;
  errno = 0;
  char *end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0' || errno != 0 || v < min || v > INT_MAX) return false;
  out = static_cast<int>(v);
  return true;
}

// True if every element of `values` is one of `allowed`, and there is at least one.
inline bool all_of_names(const std::vector<std::string> &values, std::initializer_list<const char *> allowed) {
  if (values.empty()) return false;
  for (const std::string &v : values) {
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char *a) { return v == a; })) return false;
  }
  return true;
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

// The raw MPI baseline: a dynamic window with one buffer of `bytes` per rank, in one
// lock_all epoch, that puts and gets without any of the store's protocol.
struct RawWindow {
  MPI_Win win = MPI_WIN_NULL;
  std::vector<char> mem;
  std::vector<MPI_Aint> addr;
  // cache_regions: the store's setting; false is Open MPI's default, for comparison.
  explicit RawWindow(std::size_t bytes, bool cache_regions = true) : mem(bytes + 64) {
    int p = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    // The same region-table cache as the store's window (src/transport/rma.cpp): raw MPI at
    // its best on this MPI.
    MPI_Info info;
    ok(MPI_Info_create(&info), "MPI_Info_create");
    ok(MPI_Info_set(info, "cache_dynamic_regions", cache_regions ? "true" : "false"), "MPI_Info_set");
    ok(MPI_Win_create_dynamic(info, MPI_COMM_WORLD, &win), "MPI_Win_create_dynamic");
    MPI_Info_free(&info);
    ok(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
    ok(MPI_Win_attach(win, mem.data(), static_cast<MPI_Aint>(mem.size())), "MPI_Win_attach");
    MPI_Aint a;
    MPI_Get_address(mem.data(), &a);
    addr.resize(static_cast<std::size_t>(p));
    ok(MPI_Allgather(&a, 1, MPI_AINT, addr.data(), 1, MPI_AINT, MPI_COMM_WORLD), "MPI_Allgather");
    ok(MPI_Win_lock_all(MPI_MODE_NOCHECK, win), "MPI_Win_lock_all");
  }
  ~RawWindow() {
    MPI_Win_unlock_all(win);
    MPI_Win_detach(win, mem.data());
    MPI_Win_free(&win);
  }
  void put(const std::vector<int> &targets, const void *buf, std::size_t n) {
    for (int t : targets)
      ok(MPI_Put(buf, static_cast<int>(n), MPI_BYTE, t, addr[static_cast<std::size_t>(t)], static_cast<int>(n),
                 MPI_BYTE, win),
         "MPI_Put");
    ok(MPI_Win_flush_all(win), "MPI_Win_flush_all");
  }
  // `count` puts of n bytes to each target, at successive offsets (wrapping around the window),
  // completed by one flush: the raw counterpart of a pipelined batch.
  void put_many(const std::vector<int> &targets, const void *buf, std::size_t n, int count) {
    const std::size_t room = mem.size() - n + 1;
    for (int i = 0; i < count; ++i) {
      const std::size_t off = (static_cast<std::size_t>(i) * std::max<std::size_t>(n, 8)) % room;
      for (int t : targets)
        ok(MPI_Put(buf, static_cast<int>(n), MPI_BYTE, t,
                   addr[static_cast<std::size_t>(t)] + static_cast<MPI_Aint>(off), static_cast<int>(n), MPI_BYTE, win),
           "MPI_Put");
    }
    ok(MPI_Win_flush_all(win), "MPI_Win_flush_all");
  }
  void get(int target, void *buf, std::size_t n) {
    ok(MPI_Get(buf, static_cast<int>(n), MPI_BYTE, target, addr[static_cast<std::size_t>(target)], static_cast<int>(n),
               MPI_BYTE, win),
       "MPI_Get");
    ok(MPI_Win_flush(target, win), "MPI_Win_flush");
  }
  // A baseline that failed would time nothing: the run ends, with the call named.
  static void ok(int rc, const char *call) {
    if (rc == MPI_SUCCESS) return;
    std::fprintf(stderr, "raw baseline: %s failed (MPI error %d)\n", call, rc);
    MPI_Abort(MPI_COMM_WORLD, 4);
  }
};

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
