// The helper thread: one per process. It
//   - serves control messages (slot requests from writers and readers, cache invalidations),
//   - keeps MPI progressing, because a put to this process completes only while some thread of
//     this process is inside MPI (Open MPI's osc/rdma emulates RMA with active messages that the
//     target handles in its progress engine),
//   - sleeps on its doorbell when nothing happens (see doorbell.hpp), waking at least every
//     `max_sleep_us` for messages from processes that have no bell to ring.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>

#include "doorbell.hpp"
#include "protocol.hpp"

namespace rmastore::internal {

class Helper {
public:
  using Handler = std::function<void(const CtrlMsg &, int source)>;

  // `comm` is the control communicator; the helper receives kTagHelper messages on it and
  // sleeps on its bell in `bells` (which must outlive it).
  Helper(MPI_Comm comm, Doorbells &bells, int max_sleep_us);
  ~Helper();
  Helper(const Helper &) = delete;
  Helper &operator=(const Helper &) = delete;

  void start(Handler handler);
  // Asks the thread to exit and joins it. Called by the application thread.
  void stop();

  // Queues a message, and wakes the receiving helper if it is one. Helper thread only (from
  // inside the handler).
  void send(int dest, int tag, const CtrlMsg &msg);

  double cpu_seconds() const;

  static std::int64_t now_ns();

private:
  void loop();
  bool poll_outgoing();

  struct Outgoing {
    CtrlMsg msg;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  MPI_Comm comm_;
  Doorbells &bells_;
  int rank_ = 0;
  std::int64_t max_sleep_ns_;
  Handler handler_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<double> final_cpu_seconds_{0.0};
  std::deque<Outgoing> outgoing_; // deque: queued messages keep their address while MPI sends them
};

} // namespace rmastore::internal
