#include "helper.hpp"

#include <pthread.h>
#include <sys/prctl.h>
#include <time.h>

#include <cstdio>
#include <exception>

#include "errors.hpp"

namespace rmastore::internal {
namespace {

// After activity (a message, or a ring from a waiting process) the helper polls for a short
// window, because requests and puts come in bursts, then sleeps: first briefly, then ever longer
// up to max_sleep. The window is short because a polling helper that the scheduler preempts is
// runnable, not sleeping: a doorbell cannot wake it and it waits for a time slice (milliseconds).
// Values chosen with store_bench (docs/benchmarks.md).
constexpr std::int64_t kHotWindowNs = 200'000;
constexpr std::int64_t kFirstSleepNs = 5'000;

double thread_cpu_seconds(pthread_t t) {
  clockid_t cid;
  if (pthread_getcpuclockid(t, &cid) != 0) return 0.0;
  timespec ts{};
  if (clock_gettime(cid, &ts) != 0) return 0.0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace

std::int64_t Helper::now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Helper::Helper(MPI_Comm comm, Doorbells &bells, int max_sleep_us)
    : comm_(comm), bells_(bells), max_sleep_ns_(static_cast<std::int64_t>(max_sleep_us) * 1000) {
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
}

Helper::~Helper() {
  if (thread_.joinable()) {
    // Only reached on error paths: the thread must not outlive the object it uses.
    try {
      stop();
    } catch (...) {
      std::terminate();
    }
  }
}

void Helper::start(Handler handler) {
  handler_ = std::move(handler);
  running_ = true;
  thread_ = std::thread([this] { loop(); });
}

void Helper::stop() {
  if (!thread_.joinable()) return;
  CtrlMsg m;
  m.type = MsgType::kShutdown;
  MPI_Request r;
  check_mpi(MPI_Isend(&m, sizeof m, MPI_BYTE, rank_, kTagHelper, comm_, &r), "MPI_Isend");
  bells_.ring(rank_);
  int done = 0;
  while (!done) {
    check_mpi(MPI_Test(&r, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (!done) sched_yield();
  }
  thread_.join();
}

void Helper::send(int dest, int tag, const CtrlMsg &msg) {
  Outgoing &o = outgoing_.emplace_back();
  o.msg = msg;
  check_mpi(MPI_Isend(&o.msg, sizeof o.msg, MPI_BYTE, dest, tag, comm_, &o.request), "MPI_Isend");
  if (tag == kTagHelper) bells_.ring(dest);
}

bool Helper::poll_outgoing() {
  bool any = false;
  while (!outgoing_.empty()) {
    int done = 0;
    check_mpi(MPI_Test(&outgoing_.front().request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (!done) break;
    outgoing_.pop_front();
    any = true;
  }
  return any;
}

double Helper::cpu_seconds() const {
  if (!running_.load()) return final_cpu_seconds_.load();
  return thread_cpu_seconds(const_cast<std::thread &>(thread_).native_handle());
}

void Helper::loop() {
  // Short sleeps must be short: the default timer slack (50 us) would stretch every nap.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  CtrlMsg in;
  MPI_Request recv = MPI_REQUEST_NULL;
  std::int64_t sleep_ns = kFirstSleepNs;
  std::int64_t hot_since = now_ns();
  try {
    check_mpi(MPI_Irecv(&in, sizeof in, MPI_BYTE, MPI_ANY_SOURCE, kTagHelper, comm_, &recv), "MPI_Irecv");
    for (;;) {
      const std::uint32_t ticket = bells_.ticket();
      int got = 0;
      MPI_Status st;
      check_mpi(MPI_Test(&recv, &got, &st), "MPI_Test");
      bool active = poll_outgoing();
      if (got) {
        if (in.type == MsgType::kShutdown && st.MPI_SOURCE == rank_) break;
        handler_(in, st.MPI_SOURCE);
        check_mpi(MPI_Irecv(&in, sizeof in, MPI_BYTE, MPI_ANY_SOURCE, kTagHelper, comm_, &recv), "MPI_Irecv");
        active = true;
      }
      if (active || bells_.ticket() != ticket) {
        // Rung while polling: someone waits on this process; poll on.
        hot_since = now_ns();
        sleep_ns = kFirstSleepNs;
        continue;
      }
      if (max_sleep_ns_ == 0 || now_ns() - hot_since < kHotWindowNs) {
        sched_yield();
        continue;
      }
      bells_.wait(ticket, sleep_ns);
      if (bells_.ticket() != ticket) {
        hot_since = now_ns();
        sleep_ns = kFirstSleepNs;
      } else {
        sleep_ns = std::min(sleep_ns * 2, max_sleep_ns_);
      }
    }
    // Drain replies still in flight before the communicator goes away.
    while (!outgoing_.empty()) {
      poll_outgoing();
      sched_yield();
    }
  } catch (const std::exception &e) {
    // The helper cannot report to a caller; an MPI error here means the process's MPI state is
    // broken, which the application thread will see on its next call.
    std::fprintf(stderr, "rmastore: helper thread stopped: %s\n", e.what());
  }
  final_cpu_seconds_.store(thread_cpu_seconds(pthread_self()));
  running_ = false;
}

} // namespace rmastore::internal
