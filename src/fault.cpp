#include "fault.hpp"

#if defined(RMASTORE_FAULT_INJECTION)

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace rmastore::internal {
namespace {

struct Spec {
  std::string point;
  int rank = -1;
  long nth = 1;
  long hits = 0;
};

std::mutex g_mutex;
std::vector<Spec> g_specs;
std::atomic<int> g_rank{-1};
bool g_parsed = false;

void parse_locked() {
  g_parsed = true;
  const char *env = std::getenv("RMASTORE_FAULT");
  if (env == nullptr) return;
  std::string all(env);
  std::size_t pos = 0;
  while (pos <= all.size()) {
    std::size_t end = all.find(',', pos);
    if (end == std::string::npos) end = all.size();
    const std::string item = all.substr(pos, end - pos);
    pos = end + 1;
    if (item.empty()) continue;
    Spec s;
    const std::size_t at = item.find('@');
    const std::size_t hash = item.find('#');
    s.point = item.substr(0, std::min(at, hash));
    if (at != std::string::npos) s.rank = std::atoi(item.c_str() + at + 1);
    if (hash != std::string::npos) s.nth = std::atol(item.c_str() + hash + 1);
    g_specs.push_back(s);
  }
}

} // namespace

bool trace_enabled() {
  static const bool on = std::getenv("RMASTORE_TRACE") != nullptr;
  return on;
}

// RMASTORE_TRACE=<directory> writes <directory>/trace.<rank> instead of stderr, with a
// monotonic timestamp (comparable across the processes of one machine) on each line.
void trace(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int rank = g_rank.load();
  static std::mutex file_mutex;
  static FILE *file = nullptr;
  std::lock_guard lk(file_mutex);
  const char *dir = std::getenv("RMASTORE_TRACE");
  if (file == nullptr && rank >= 0 && dir[0] == '/') {
    const std::string path = std::string(dir) + "/trace." + std::to_string(rank);
    file = std::fopen(path.c_str(), "w");
  }
  std::fprintf(file != nullptr ? file : stderr, "%lld.%06ld rmastore trace [rank %d]: %s\n",
               static_cast<long long>(ts.tv_sec), ts.tv_nsec / 1000, rank, line);
  if (file != nullptr) std::fflush(file);
}

void fault_set_rank(int rank) {
  g_rank.store(rank);
}

void fault_point(const char *name) {
  std::lock_guard lk(g_mutex);
  if (!g_parsed) parse_locked();
  for (Spec &s : g_specs) {
    if (s.point != name || (s.rank >= 0 && s.rank != g_rank.load())) continue;
    if (++s.hits == s.nth) {
      std::fprintf(stderr, "rmastore: fault injection: rank %d dies at %s\n", g_rank.load(), name);
      std::fflush(stderr);
      raise(SIGKILL);
    }
  }
}

void fault_delay(const char *name) {
  static const std::string spec = [] {
    const char *env = std::getenv("RMASTORE_DELAY");
    return std::string(env != nullptr ? env : "");
  }();
  if (spec.empty()) return;
  const std::string point = std::string(name) + ":";
  for (std::size_t pos = 0; pos < spec.size();) {
    std::size_t end = spec.find(',', pos);
    if (end == std::string::npos) end = spec.size();
    if (spec.compare(pos, point.size(), point) == 0) {
      const long us = std::atol(spec.c_str() + pos + point.size());
      timespec nap{us / 1000000, (us % 1000000) * 1000};
      nanosleep(&nap, nullptr);
      return;
    }
    pos = end + 1;
  }
}

} // namespace rmastore::internal

#endif
