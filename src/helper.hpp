// The helper thread: one per process. It
//   - serves control messages (slot requests from writers and readers, cache invalidations),
//   - keeps MPI progressing, because a put to this process completes only while some thread of
//     this process is inside MPI (Open MPI's osc/rdma emulates RMA with active messages that the
//     target handles in its progress engine),
//   - sleeps when nothing happens, backing off from spinning to at most `max_sleep_us`.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>

#include "protocol.hpp"

namespace rmastore::internal {

class Helper {
public:
  using Handler = std::function<void(const CtrlMsg &, int source)>;

  // `comm` is the control communicator; the helper receives kTagHelper messages on it.
  Helper(MPI_Comm comm, int max_sleep_us);
  ~Helper();
  Helper(const Helper &) = delete;
  Helper &operator=(const Helper &) = delete;

  void start(Handler handler);
  // Asks the thread to exit and joins it. Called by the application thread.
  void stop();

  // Queues a message. Helper thread only (from inside the handler).
  void send(int dest, int tag, const CtrlMsg &msg);

  // Any thread: something is going on; stay responsive for a while.
  void mark_active() { last_activity_ns_.store(now_ns(), std::memory_order_relaxed); }

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
  int rank_ = 0;
  std::int64_t max_sleep_ns_;
  Handler handler_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<std::int64_t> last_activity_ns_{0};
  std::atomic<double> final_cpu_seconds_{0.0};
  std::deque<Outgoing> outgoing_; // deque: queued messages keep their address while MPI sends them
};

} // namespace rmastore::internal
