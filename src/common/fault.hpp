// Fault injection for tests: RMASTORE_FAULT_POINT("name") kills the calling process with
// SIGKILL when the environment variable RMASTORE_FAULT names that point for this process.
//
//   RMASTORE_FAULT=<point>@<rank>[#<n>][,...]
//
// kills process <rank> (its rank in the communicator the store was created on) the <n>-th time
// (default 1st) it reaches <point>. Points are compiled in only when the library is built with
// RMASTORE_FAULT_INJECTION (the test build, rmastore_internal); the installed library has none.
//
// Under tests/mpirun_test.sh (RMASTORE_TEST_VERDICT_DIR set) a point that fires first leaves the
// file fault-fired.<point>@<rank>#<n> there, and a spec naming an unknown point leaves
// fault-unknown.<rank>: the runner fails a scenario whose specs did not all fire, so that a
// misspelled name or a count never reached cannot pass unnoticed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rmastore::internal {

#if defined(RMASTORE_FAULT_INJECTION)
void fault_set_rank(int rank);
void fault_point(const char *name);
#define RMASTORE_FAULT_POINT(name) ::rmastore::internal::fault_point(name)
// A point whose death the caller stages itself: true (marker written) where RMASTORE_FAULT
// would kill; the caller then saves what it needs and raises SIGKILL.
bool fault_armed(const char *name);
#define RMASTORE_FAULT_ARMED(name) ::rmastore::internal::fault_armed(name)
// Saves, as the file stale.<holder_id> in the verdict directory, a write that a process dying
// at put.stale would have sent: a test lands it after the recovery (tests/test_recover_stale.cpp).
void fault_save_write(int holder_id, std::uint64_t address, const void *bytes, std::size_t length);
// A death at a moment rather than at a point: with RMASTORE_FAULT naming <name>@<rank> (the n-th
// call, #<n>), a FaultTimer made at the start of a call kills its process
// RMASTORE_FAULT_TIMER_US microseconds later (times RMASTORE_TEST_TIME_SCALE), wherever the call
// then is, or when the call ends if it ends first: either way the process dies inside the call,
// and its marker says which. store_recover has one, "recover.timer" (tests: a death at a random
// moment of a recovery).
class FaultTimer {
public:
  explicit FaultTimer(const char *name);
  ~FaultTimer();
  FaultTimer(const FaultTimer &) = delete;
  FaultTimer &operator=(const FaultTimer &) = delete;

private:
  bool armed_ = false;
};
#define RMASTORE_FAULT_TIMER(name) ::rmastore::internal::FaultTimer rmastore_fault_timer_(name)
// RMASTORE_DELAY=<point>:<microseconds>[,...] makes every process sleep that long each time it
// reaches <point>: tests stretch a phase (a repair) to observe what runs beside it. The delays
// are multiplied by RMASTORE_TEST_TIME_SCALE (default 1), like every time bound of the tests.
void fault_delay(const char *name);
#define RMASTORE_FAULT_DELAY(name) ::rmastore::internal::fault_delay(name)
// RMASTORE_FAULT_OFF=<mechanism>[,...] switches a mechanism off in the test build, so that a
// test can show that another one does the work alone: "notify" makes the helper thread of a
// store with STORE_DETECTOR_PING ignore the failures MPI reports to it, leaving the pings as the
// only detector (tests/test_ping.cpp).
bool fault_off(const char *mechanism);
#define RMASTORE_FAULT_OFF(mechanism) ::rmastore::internal::fault_off(mechanism)
// With RMASTORE_TRACE set, the test build prints lock and repair events to stderr: the order
// of events across ranks is what a hang in the localized variant is diagnosed from.
bool trace_enabled();
void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define RMASTORE_TRACE(...)                                                                                            \
  do {                                                                                                                 \
    if (::rmastore::internal::trace_enabled()) ::rmastore::internal::trace(__VA_ARGS__);                               \
  } while (0)
#else
#define RMASTORE_TRACE(...)                                                                                            \
  do {                                                                                                                 \
  } while (0)
inline void fault_set_rank(int) {}
#define RMASTORE_FAULT_ARMED(name) false
inline void fault_save_write(int, std::uint64_t, const void *, std::size_t) {}
#define RMASTORE_FAULT_OFF(mechanism) false
#define RMASTORE_FAULT_POINT(name)                                                                                     \
  do {                                                                                                                 \
  } while (0)
#define RMASTORE_FAULT_TIMER(name)                                                                                     \
  do {                                                                                                                 \
  } while (0)
#define RMASTORE_FAULT_DELAY(name)                                                                                     \
  do {                                                                                                                 \
  } while (0)
#endif

} // namespace rmastore::internal
