// test_failure's stall hunter (opt-in), used by Run::timed around every store call.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace rmastore::test::failure {

// For hunting stalls (opt-in): with RMASTORE_TEST_STALL_DUMP=<seconds>, a store call still
// running after that long has gdb print every thread's stack of this process, once per call,
// into stall.<pid>.<n> of RMASTORE_TEST_STALL_DIR (or the working directory). A stall that
// ends on its own leaves its stacks behind, which the call's time alone does not tell.
class StallWatch {
public:
  StallWatch();
  ~StallWatch();
  // A store call `what` starts, and ends.
  void begin(const char *what);
  void end();

private:
  static std::int64_t now_ns();
  void watch();
  double after_ = 0;
  std::string dir_, gdb_extra_;
  std::atomic<bool> stop_{false};
  std::atomic<const char *> what_{""};
  std::atomic<std::int64_t> since_ns_{0}, dumped_for_{0};
  std::atomic<int> dumps_{0};
  std::thread thread_;
};

} // namespace rmastore::test::failure
