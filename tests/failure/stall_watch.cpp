// test_failure's stall hunter (stall_watch.hpp).
#include "stall_watch.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "scenario.hpp"

namespace rmastore::test::failure {

StallWatch::StallWatch() {
  const char *v = std::getenv("RMASTORE_TEST_STALL_DUMP");
  if (v == nullptr || std::atof(v) <= 0) return;
  after_ = std::atof(v);
  const char *dir = std::getenv("RMASTORE_TEST_STALL_DIR");
  dir_ = dir != nullptr ? dir : ".";
  // More for gdb to print of this process (a script: -x FILE), for a stall under study.
  if (const char *script = std::getenv("RMASTORE_TEST_STALL_GDB")) gdb_extra_ = std::string(" -x ") + script;
  // Which process is which rank, for reading the stacks of all of them.
  if (FILE *f = std::fopen((dir_ + "/rank." + std::to_string(getpid())).c_str(), "w")) {
    std::fprintf(f, "%d\n", world_rank());
    std::fclose(f);
  }
  thread_ = std::thread([this] { watch(); });
}

StallWatch::~StallWatch() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void StallWatch::begin(const char *what) {
  what_ = what;
  since_ns_.store(now_ns());
}

void StallWatch::end() {
  const std::int64_t since = since_ns_.exchange(0);
  if (since == 0 || since != dumped_for_.load()) return;
  // The call whose stacks were taken is over: how long it took in all, in the summary.
  if (FILE *f = std::fopen((dir_ + "/stall-summary").c_str(), "a")) {
    std::fprintf(f, "pid %d rank %d: %s took %.3f s (stacks in stall.%d.%d)\n", getpid(), world_rank(), what_.load(),
                 static_cast<double>(now_ns() - since) / 1e9, getpid(), dumps_.load());
    std::fclose(f);
  }
}

std::int64_t StallWatch::now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

void StallWatch::watch() {
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::int64_t since = since_ns_.load(), now = now_ns();
    if (since == 0 || since == dumped_for_.load() || static_cast<double>(now - since) < after_ * 1e9) continue;
    // Numbered before gdb runs: the call may end while it does.
    const int number = ++dumps_;
    dumped_for_.store(since);
    const std::string out = dir_ + "/stall." + std::to_string(getpid()) + "." + std::to_string(number);
    // First this host's TCP sockets (queues, timers, windows), taken before gdb stops
    // anything; then opal_progress's event-loop state (users, its lock, poll period, last
    // poll: whether btl/tcp's sockets are being read) and this process's stacks. Every
    // process of every simulated host is visible here (they share the pid namespace): the
    // stacks of all the job's processes follow, unless another process of the job dumped
    // them in the last 10 s.
    const std::string pid = std::to_string(getpid());
    const std::string own = "ss -tnoiep 2>/dev/null; ls -l /proc/" + pid + "/fd; grep -H tfd /proc/" + pid +
                            "/fdinfo/* 2>/dev/null; gdb -batch -p " + pid +
                            " -ex 'p (int)num_event_users' -ex \"p (int)'lock.0'\""
                            " -ex 'p (long)event_progress_delta' -ex 'p (long)event_progress_last_time'"
                            " -ex 'thread apply all bt'" +
                            gdb_extra_;
    const std::string all = "if [ -z \"$(find " + dir_ +
                            " -name 'all.*' -newermt '-10 seconds' 2>/dev/null)\" ]; then touch " + dir_ + "/all." +
                            pid + "; for p in $(pgrep -x test_failure); do echo \"== pid $p rank $(cat " + dir_ +
                            "/rank.$p 2>/dev/null)\"; gdb -batch -p $p -ex 'thread apply all bt'; done; fi";
    const std::string cmd = "(echo 'rank " + std::to_string(world_rank()) + ": " + what_.load() + "'; " + own + "; " +
                            all + ") > " + out + " 2>&1";
    std::fprintf(stderr, "[rank %d] %s has run for %.3f s: stacks in %s\n", world_rank(), what_.load(),
                 static_cast<double>(now - since) / 1e9, out.c_str());
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "[rank %d] gdb failed\n", world_rank());
  }
}

} // namespace rmastore::test::failure
