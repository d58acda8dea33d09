// The helper thread: one per process. It
//   - serves control messages: grants, locks, witness records and lists for the holder side
//     (holder/holder.hpp), invalidations and notices for the client side,
//   - keeps MPI progressing, because a put to this process completes only while some thread of
//     this process is inside MPI (Open MPI's osc/rdma emulates RMA with active messages that the
//     target handles in its progress engine),
//   - sleeps on its doorbell when nothing happens (see doorbell.hpp), waking at least every
//     `max_sleep_us` for messages from processes that have no bell to ring.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/protocol.hpp"
#include "transport/doorbell.hpp"
#include "transport/failure.hpp"

namespace rmastore::internal {

class Helper {
public:
  // Handles one message. May throw: the helper then answers a request with
  // ReplyStatus::kError and carries on.
  using Handler = std::function<void(const CtrlMsg &, int source)>;

  // `comm` is the control communicator; the helper receives kTagHelper messages on it and
  // sleeps on its bell in `bells`. It records failures and revocation of `comm` in `failures`
  // unless `detector` is STORE_DETECTOR_OFF. Both must outlive it.
  Helper(MPI_Comm comm, Doorbells &bells, FailureState &failures, int detector, int max_sleep_us);
  ~Helper();
  Helper(const Helper &) = delete;
  Helper &operator=(const Helper &) = delete;

  // `on_failures` (optional) runs on the helper thread each time it recorded new failures.
  void start(Handler handler, std::function<void()> on_failures = {});
  // Asks the thread to exit and joins it. Needs no MPI call, so it works on a broken
  // communicator too. Called by the application thread.
  void stop();

  // Queues a message, and wakes the receiving helper if it is one. Helper thread only (from
  // inside the handler).
  void send(int dest, int tag, const CtrlMsg &msg);
  // Queues a reply of 64-bit words (kList). Helper thread only.
  void send_words(int dest, int tag, std::vector<std::uint64_t> words);

  // Set when the thread stopped on an MPI error: requests to this process get no answer then,
  // and the application thread must report the error instead of waiting.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  const std::string &failure() const { return failure_; }

  double cpu_seconds() const;

private:
  void loop();
  // Serves every request of the message received from `source`, and sends the replies to it
  // that serving produced as one message.
  void serve_message(int source);
  void serve_one(const CtrlMsg &msg, int source);
  bool poll_outgoing();
  void post_receive();
  bool poll_receive();
  bool drain_pings();

  struct Outgoing {
    std::vector<CtrlMsg> msgs;
    std::vector<std::uint64_t> words; // or these, if not empty
    MPI_Request request = MPI_REQUEST_NULL;
  };
  // Queues msgs as one message.
  void send_all(int dest, int tag, std::vector<CtrlMsg> msgs);

  MPI_Comm comm_;
  MPI_Comm self_ = MPI_COMM_NULL; // never revoked: keeps MPI progressing after comm_ is
  Doorbells &bells_;
  FailureState &failures_;
  int detector_;
  int rank_ = 0;
  std::int64_t max_sleep_ns_;
  Handler handler_;
  std::function<void()> on_failures_;
  int handled_failures_ = 0; // the failure count on_failures_ last ran for
  void absorb();
  std::thread thread_;
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> running_{false};
  std::atomic<bool> failed_{false};
  std::string failure_; // written before failed_ is set
  std::atomic<double> final_cpu_seconds_{0.0};
  // Target of the posted receive: must outlive it, so not on the thread's stack.
  std::array<CtrlMsg, kMaxPack> in_{};
  // While a message is served: its replies to (pack_dest_, pack_tag_), sent together after.
  bool packing_ = false;
  int pack_dest_ = -1, pack_tag_ = 0;
  std::vector<CtrlMsg> pack_;
  MPI_Request recv_ = MPI_REQUEST_NULL;
  std::deque<Outgoing> outgoing_; // deque: queued messages keep their address while MPI sends them
};

} // namespace rmastore::internal
