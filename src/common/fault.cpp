#include "common/fault.hpp"

#if defined(RMASTORE_FAULT_INJECTION)

#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
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

// Every RMASTORE_FAULT_POINT in src/, so that a misspelled spec is refused instead of never
// firing. tests/fault_points.sh checks this list against the sources.
constexpr const char *kPoints[] = {"put.start",
                                   "snapshot.part_written",
                                   "snapshot.before_manifest",
                                   "put.between_copies",
                                   "put.before_switch",
                                   "enlarge.serve",
                                   "tx.before_pending",
                                   "tx.between_pending",
                                   "tx.before_record",
                                   "tx.after_record",
                                   "tx.during_apply",
                                   "recover.start",
                                   "recover.after_revoke",
                                   "recover.after_shrink",
                                   "recover.after_barrier",
                                   "recover.after_ids",
                                   "runtime.after_ctrl_dup",
                                   "runtime.before_window",
                                   "runtime.before_bells",
                                   "recover.after_window",
                                   "recover.rereplicate",
                                   "recover.before_move",
                                   "recover.after_rereplicate",
                                   "recover.before_agree",
                                   "put.stale",
                                   "lock.acquired",
                                   "lock.break",
                                   "lock.revoke",
                                   "repair.transfer",
                                   "finalize.before_barrier",
                                   "delete.after_tombstone",
                                   "delete.before_reclaim",
                                   "batch.between_keys",
                                   "recover.timer",
                                   "recover.skewed_view"};

bool known_point(const std::string &name) {
  for (const char *p : kPoints) {
    if (name == p) return true;
  }
  return false;
}

// A file in the test's verdict directory (RMASTORE_TEST_VERDICT_DIR, set by
// tests/mpirun_test.sh): the runner fails a scenario whose faults did not fire as configured.
// Plain POSIX calls: this runs right before raise(SIGKILL), and must be on disk by then.
void write_marker(const std::string &name, const std::string &text) {
  const char *dir = std::getenv("RMASTORE_TEST_VERDICT_DIR");
  if (dir == nullptr || dir[0] == '\0') return;
  const std::string path = std::string(dir) + "/" + name;
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  const ssize_t n = write(fd, text.data(), text.size());
  (void)n; // nothing to do about a short write but let the runner see a missing marker
  close(fd);
}

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
    if (!known_point(s.point)) {
      // Refused loudly: a spec that can never fire would let its scenario pass without the
      // death it is about.
      std::fprintf(stderr, "rmastore: fault injection: unknown point '%s' in RMASTORE_FAULT\n", s.point.c_str());
      write_marker("fault-unknown." + std::to_string(g_rank.load()), item + "\n");
      continue;
    }
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

bool fault_armed(const char *name) {
  std::lock_guard lk(g_mutex);
  if (!g_parsed) parse_locked();
  for (Spec &s : g_specs) {
    if (s.point != name || (s.rank >= 0 && s.rank != g_rank.load())) continue;
    if (++s.hits == s.nth) {
      const int rank = g_rank.load();
      std::fprintf(stderr, "rmastore: fault injection: rank %d dies at %s (hit %ld)\n", rank, name, s.hits);
      std::fflush(stderr);
      // Named after the spec that fired, in its full form <point>@<rank>#<n>.
      write_marker("fault-fired." + s.point + "@" + std::to_string(rank) + "#" + std::to_string(s.nth),
                   s.point + " rank " + std::to_string(rank) + " hit " + std::to_string(s.hits) + "\n");
      return true;
    }
  }
  return false;
}

void fault_point(const char *name) {
  if (fault_armed(name)) raise(SIGKILL);
}

namespace {

// RMASTORE_TEST_TIME_SCALE (tests/test_util.hpp): the tests' delays scale with their bounds.
double time_scale() {
  static const double scale = [] {
    const char *v = std::getenv("RMASTORE_TEST_TIME_SCALE");
    const double f = v != nullptr ? std::atof(v) : 1.0;
    return f > 0 ? f : 1.0;
  }();
  return scale;
}

// The armed timer's state: 0 none, 1 running, 2 fired (the process is dying).
std::atomic<int> g_timer{0};
std::int64_t g_timer_start_ns = 0;

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

[[noreturn]] void timer_fire(const char *how) {
  const int rank = g_rank.load();
  const double us = static_cast<double>(now_ns() - g_timer_start_ns) / 1e3;
  std::fprintf(stderr, "rmastore: fault injection: rank %d dies %s, %.0f us into the call\n", rank, how, us);
  std::fflush(stderr);
  // The marker of an armed spec was written by fault_armed; this one says when it fired.
  write_marker("fault-timer." + std::to_string(rank), std::string(how) + " " + std::to_string(us) + " us\n");
  raise(SIGKILL);
  for (;;) pause();
}

} // namespace

FaultTimer::FaultTimer(const char *name) {
  if (!fault_armed(name)) return;
  const char *env = std::getenv("RMASTORE_FAULT_TIMER_US");
  const double us = std::max(0.0, env != nullptr ? std::atof(env) : 1000.0);
  const auto delay_ns = static_cast<std::int64_t>(us * 1e3 * time_scale());
  g_timer_start_ns = now_ns();
  g_timer.store(1);
  armed_ = true;
  std::thread([delay_ns] {
    timespec ts{static_cast<time_t>(delay_ns / 1000000000), static_cast<long>(delay_ns % 1000000000)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    int running = 1;
    if (g_timer.compare_exchange_strong(running, 2)) timer_fire("at its timer");
  }).detach();
}

FaultTimer::~FaultTimer() {
  int running = 1;
  if (armed_ && g_timer.compare_exchange_strong(running, 2)) timer_fire("at the end of the call, before its timer");
}

void fault_save_write(int holder_id, std::uint64_t address, const void *bytes, std::size_t length) {
  const std::uint64_t head[2] = {address, length};
  std::string record(reinterpret_cast<const char *>(head), sizeof head);
  record.append(static_cast<const char *>(bytes), length);
  write_marker("stale." + std::to_string(holder_id), record);
}

bool fault_off(const char *mechanism) {
  static const std::string spec = [] {
    const char *env = std::getenv("RMASTORE_FAULT_OFF");
    return "," + std::string(env != nullptr ? env : "") + ",";
  }();
  return spec.find("," + std::string(mechanism) + ",") != std::string::npos;
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
      // A test's stretch is one of its timings: it scales with the tests' time bounds, so that
      // a phase stretched to outlast a bound still outlasts it (tests/test_util.hpp).
      const long us =
          static_cast<long>(static_cast<double>(std::atol(spec.c_str() + pos + point.size())) * time_scale());
      timespec nap{us / 1000000, (us % 1000000) * 1000};
      nanosleep(&nap, nullptr);
      return;
    }
    pos = end + 1;
  }
}

} // namespace rmastore::internal

#endif
