#include "transport/helper.hpp"

#include <pthread.h>
#include <sys/prctl.h>
#include <time.h>

#include <cstdio>
#include <exception>

#include "common/clock.hpp"
#include "common/ulfm.hpp"

#include "common/errors.hpp"
#include "common/fault.hpp"
#include "common/tsan.hpp"

namespace rmastore::internal {
namespace {

// After activity (a message, or a ring from a waiting process) the helper polls for a short
// window, because requests and puts come in bursts, then sleeps: first briefly, then ever longer
// up to max_sleep. The window is short because a polling helper that the scheduler preempts is
// runnable, not sleeping: a doorbell cannot wake it and it waits for a time slice (milliseconds).
// Values chosen with store_bench (docs/log/benchmarks-history.md).
constexpr std::int64_t kHotWindowNs = 200'000;
constexpr std::int64_t kFirstSleepNs = 5'000;
// How often the helper asks MPI for the failed processes (its receive does not always report
// them, and after a revocation it is gone).
constexpr std::int64_t kFailurePollNs = 1'000'000;

double thread_cpu_seconds(pthread_t t) {
  clockid_t cid;
  if (pthread_getcpuclockid(t, &cid) != 0) return 0.0;
  timespec ts{};
  if (clock_gettime(cid, &ts) != 0) return 0.0;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace

Helper::Helper(MPI_Comm comm, Doorbells &bells, FailureState &failures, int detector, int max_sleep_us)
    : comm_(comm), bells_(bells), failures_(failures), detector_(detector),
      max_sleep_ns_(static_cast<std::int64_t>(max_sleep_us) * 1000) {
  check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_dup(MPI_COMM_SELF, &self_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(self_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
}

Helper::~Helper() {
  if (thread_.joinable()) stop();
  if (self_ != MPI_COMM_NULL) MPI_Comm_free(&self_);
}

void Helper::start(Handler handler, std::function<void()> on_failures) {
  handler_ = std::move(handler);
  on_failures_ = std::move(on_failures);
  running_ = true;
  thread_ = std::thread([this] { loop(); });
}

void Helper::stop() {
  if (!thread_.joinable()) return;
  stop_requested_.store(true, std::memory_order_release);
  bells_.ring(rank_); // without a bell the thread sees the flag after at most max_sleep
  thread_.join();
}

void Helper::send(int dest, int tag, const CtrlMsg &msg) {
  RMASTORE_TRACE("helper sends type %u #%llu %llu/%u status %u to %d tag %d", static_cast<unsigned>(msg.type),
                 (unsigned long long)msg.request, (unsigned long long)msg.key, msg.ns,
                 static_cast<unsigned>(msg.status), dest, tag);
  if (packing_ && dest == pack_dest_ && tag == pack_tag_ && pack_.size() < kMaxPack) {
    pack_.push_back(msg);
    return;
  }
  send_all(dest, tag, {msg});
}

void Helper::send_all(int dest, int tag, std::vector<CtrlMsg> msgs) {
  Outgoing &o = outgoing_.emplace_back();
  o.msgs = std::move(msgs);
  reply_sent();
  const int rc = MPI_Isend(o.msgs.data(), static_cast<int>(o.msgs.size() * sizeof(CtrlMsg)), MPI_BYTE, dest, tag, comm_,
                           &o.request);
  if (rc != MPI_SUCCESS) {
    outgoing_.pop_back();
    if (is_failure_error(rc)) return; // to a failed process, or after revocation: dropped
    check_mpi(rc, "MPI_Isend");
  }
  if (tag == kTagHelper) bells_.ring(dest);
}

void Helper::send_words(int dest, int tag, std::vector<std::uint64_t> words) {
  Outgoing &o = outgoing_.emplace_back();
  o.words = std::move(words);
  reply_sent();
  const int rc =
      MPI_Isend(o.words.data(), static_cast<int>(o.words.size()), MPI_UINT64_T, dest, tag, comm_, &o.request);
  if (rc != MPI_SUCCESS) {
    outgoing_.pop_back();
    if (is_failure_error(rc)) return;
    check_mpi(rc, "MPI_Isend");
  }
}

bool Helper::poll_outgoing() {
  bool any = false;
  while (!outgoing_.empty()) {
    int done = 0;
    const int rc = MPI_Test(&outgoing_.front().request, &done, MPI_STATUS_IGNORE);
    // A reply to a process that failed, or on a revoked communicator, is dropped.
    if (rc != MPI_SUCCESS && !is_failure_error(rc)) check_mpi(rc, "MPI_Test");
    if (rc == MPI_SUCCESS && !done) break;
    outgoing_.pop_front();
    any = true;
  }
  return any;
}

double Helper::cpu_seconds() const {
  if (!running_.load()) return final_cpu_seconds_.load();
  return thread_cpu_seconds(const_cast<std::thread &>(thread_).native_handle());
}

// Records the failures MPI knows of and acknowledges them. The store hears of every change of
// the failure set once, whichever thread recorded it first: application and repair threads
// record failures too, when their own operations fail.
void Helper::absorb() {
  // Test build: RMASTORE_FAULT_OFF=notify leaves the pings alone to detect failures.
  if (detector_ == STORE_DETECTOR_OFF || (detector_ == STORE_DETECTOR_PING && RMASTORE_FAULT_OFF("notify"))) {
    FailureState scratch(1); // acknowledged even without detection, or the receive keeps reporting it
    absorb_failures(comm_, scratch);
    return;
  }
  absorb_failures(comm_, failures_);
  const int now = failures_.failures();
  if (now == handled_failures_ || recv_ == MPI_REQUEST_NULL || !on_failures_) return;
  handled_failures_ = now;
  RMASTORE_TRACE("helper handles %d failures", now);
  try {
    on_failures_();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "rmastore: helper could not handle a failure: %s\n", e.what());
  }
}

void Helper::serve_message(int source) {
  std::size_t n = 0;
  while (n < in_.size() && in_[n].type != MsgType{}) ++n;
  // One agent's requests: their replies go to the tag it listens on.
  packing_ = true;
  pack_dest_ = source;
  pack_tag_ = n > 0 ? in_[0].reply_tag : 0;
  for (std::size_t i = 0; i < n; ++i) serve_one(in_[i], source);
  packing_ = false;
  if (!pack_.empty()) send_all(source, pack_tag_, std::move(pack_));
  pack_.clear();
}

void Helper::serve_one(const CtrlMsg &msg, int source) {
  try {
    handler_(msg, source);
  } catch (const std::exception &e) {
    // Every request that expects a reply gets one, or its sender waits until some unrelated
    // failure ends the wait. Replies go where the requester said (the repair thread has its own
    // tag).
    switch (msg.type) {
    case MsgType::kList:
      send_words(source, kTagList, {msg.request, 0});
      break;
    case MsgType::kAcquireWrite:
    case MsgType::kLookup:
    case MsgType::kLock:
    case MsgType::kWitness:
    case MsgType::kUnwitness:
    case MsgType::kWitnessQuery:
      send(source, msg.reply_tag, reply_to(msg, ReplyStatus::kError));
      break;
    default:
      break;
    }
    std::fprintf(stderr, "rmastore: helper could not serve a request from %d: %s\n", source, e.what());
  }
}

void Helper::post_receive() {
  for (CtrlMsg &m : in_) m.type = MsgType{};
  check_mpi(MPI_Irecv(in_.data(), static_cast<int>(sizeof in_), MPI_BYTE, MPI_ANY_SOURCE, kTagHelper, comm_, &recv_),
            "MPI_Irecv");
}

// Polls the control receive. A failure shows up as an error on it: record it and go on (the
// request stays posted after MPIX_ERR_PROC_FAILED_PENDING). After a revocation nothing will be
// received any more. Returns true if a message was served or a failure seen.
bool Helper::poll_receive() {
  if (recv_ == MPI_REQUEST_NULL) return false;
  int got = 0;
  MPI_Status st;
  const int rc = MPI_Test(&recv_, &got, &st);
  if (rc == MPI_SUCCESS && !got) return false;
  int cls = MPI_SUCCESS;
  if (rc != MPI_SUCCESS) {
    if (!is_failure_error(rc)) check_mpi(rc, "MPI_Test");
    MPI_Error_class(rc, &cls);
  }
  if (cls == MPIX_ERR_REVOKED) {
    if (detector_ != STORE_DETECTOR_OFF) failures_.mark_revoked();
    if (recv_ != MPI_REQUEST_NULL) {
      MPI_Cancel(&recv_);
      MPI_Wait(&recv_, MPI_STATUS_IGNORE);
    }
    recv_ = MPI_REQUEST_NULL;
    return true;
  }
  // Open MPI 5.0.7: a test that finds the receive unmatched after a failure stores
  // MPI_ERR_PROC_FAILED_PENDING in the request. If a message then matches it, the request
  // completes with that stale error, and every later MPI_Test returns the error and never frees
  // it: the helper would serve nothing any more (seen after the second of two deaths). Such a
  // message was delivered like any other.
  const bool stale = got && cls == MPIX_ERR_PROC_FAILED_PENDING && recv_ != MPI_REQUEST_NULL;
  if (got && (rc == MPI_SUCCESS || stale)) {
    if (stale) {
      RMASTORE_TRACE("helper receive completed with a stale error, from %d", st.MPI_SOURCE);
      MPI_Request_free(&recv_);
    }
    serve_message(st.MPI_SOURCE);
    post_receive();
  } else if (recv_ == MPI_REQUEST_NULL) {
    post_receive(); // it completed in error
  }
  if (rc != MPI_SUCCESS) absorb();
  return true;
}

// The paper's detector sends a ping before each RMA operation; the target consumes it here.
bool Helper::drain_pings() {
  bool any = false;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagPing, comm_, &flag, &st) != MPI_SUCCESS || !flag) return any;
    char ping;
    if (MPI_Recv(&ping, 1, MPI_BYTE, st.MPI_SOURCE, kTagPing, comm_, MPI_STATUS_IGNORE) != MPI_SUCCESS) return any;
    any = true;
  }
}

void Helper::loop() {
  // Short sleeps must be short: the default timer slack (50 us) would stretch every nap.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  std::int64_t sleep_ns = kFirstSleepNs;
  std::int64_t hot_since = monotonic_ns();
  std::int64_t next_failure_poll = 0;
  try {
    post_receive();
    while (!stop_requested_.load(std::memory_order_acquire)) {
      const std::uint32_t ticket = bells_.ticket();
      bool active = poll_outgoing();
      active = poll_receive() || active;
      if (detector_ == STORE_DETECTOR_PING && recv_ != MPI_REQUEST_NULL) active = drain_pings() || active;
      if (recv_ == MPI_REQUEST_NULL) {
        // Revoked: serve no more requests, but keep this process's MPI progressing, because
        // RMA aimed at it completes only in its progress engine.
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, 0, self_, &flag, MPI_STATUS_IGNORE);
      }
      // The pending receive does not always report a failure: seen in Open MPI 5.0.7, a rank
      // whose any-source receive kept matching messages never heard of a death the others
      // knew for 20 s. After a revocation that receive is gone altogether. Ask MPI directly.
      if (detector_ != STORE_DETECTOR_OFF && monotonic_ns() >= next_failure_poll) {
        absorb();
        next_failure_poll = monotonic_ns() + kFailurePollNs;
      }
      if (active || bells_.ticket() != ticket) {
        // Rung while polling: someone waits on this process; poll on.
        hot_since = monotonic_ns();
        sleep_ns = kFirstSleepNs;
        continue;
      }
      if (max_sleep_ns_ == 0 || monotonic_ns() - hot_since < kHotWindowNs) {
        sched_yield();
        continue;
      }
      bells_.wait(ticket, sleep_ns);
      if (bells_.ticket() != ticket) {
        hot_since = monotonic_ns();
        sleep_ns = kFirstSleepNs;
      } else {
        sleep_ns = std::min(sleep_ns * 2, max_sleep_ns_);
      }
    }
  } catch (const std::exception &e) {
    failure_ = e.what();
    failed_.store(true, std::memory_order_release);
    std::fprintf(stderr, "rmastore: helper thread of rank %d stopped: %s\n", rank_, e.what());
  }
  // A cancelled receive completes locally.
  if (recv_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&recv_);
    MPI_Wait(&recv_, MPI_STATUS_IGNORE);
    recv_ = MPI_REQUEST_NULL;
  }
  // Replies still in flight finish before the communicator goes away: they go to processes
  // that asked and wait for them. Bounded, in case one of them is gone.
  const std::int64_t give_up = monotonic_ns() + 1'000'000'000;
  while (!outgoing_.empty() && monotonic_ns() < give_up) {
    try {
      poll_outgoing();
    } catch (const std::exception &) {
      outgoing_.pop_front();
    }
    sched_yield();
  }
  final_cpu_seconds_.store(thread_cpu_seconds(pthread_self()));
  running_ = false;
}

} // namespace rmastore::internal
