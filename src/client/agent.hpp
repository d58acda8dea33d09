// A client thread's state: its reply tag, request numbers, staging buffer, and the messages it
// sent without waiting for them. Also what its waits need to know about the others. The
// application thread has one; so has the localized variant's repair thread.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <vector>

#include "common/protocol.hpp"
#include "transport/rma.hpp"
#include "transport/runtime.hpp"

namespace rmastore::internal {

class Agent final : public WaitContext {
public:
  enum Kind : int { kApplication = 0, kRepair = 1 };
  // `id`: the process's stable id, which its lock words carry.
  Agent(const Runtime &rt, int id, Kind kind);

  bool dead(int rank) const override { return rt_.dead(rank); }
  bool revoked() const override;
  void abandon(MPI_Request r) override { abandoned_rma_.push_back(r); }
  void check() const override { rt_.check_helper(); }
  Doorbells *bells() const override { return rt_.bells.get(); }
  // Sends `msg` to `dest`'s helper without waiting; completed by later calls of flush().
  void post(int dest, const CtrlMsg &msg) { post(dest, &msg, 1); }
  // Sends msgs[0..n), n <= kMaxPack, to `dest`'s helper as one message.
  void post(int dest, const CtrlMsg *msgs, std::size_t n);
  // Completes what post() sent, without waiting: sends to failed processes are dropped.
  void flush();
  // Waits (bounded by failure detection) until everything post() sent has completed.
  void drain();
  // store_recover: the RMA requests abandoned were aimed at failed processes, and their window
  // goes. They never complete.
  void forget_abandoned() { abandoned_rma_.clear(); }
  // The word the locks of a new acquisition by this agent hold (slot.hpp): a new one each time.
  std::uint64_t lock_word();

  const Kind kind;
  const int reply_tag; // tag of the replies it receives
  std::uint64_t next_request = 1;
  std::uint64_t requests_sent = 0;
  std::vector<std::byte> staging;
  // While >= 0, waits on messages give up when the failure count differs from it (a lock
  // wait must start over when placement changed: see LockClient::acquire).
  int lock_view = -1;
  const std::atomic<bool> *stop = nullptr; // repair thread: set when it must give up

private:
  struct Outgoing {
    std::vector<CtrlMsg> msgs;
    MPI_Request request = MPI_REQUEST_NULL;
    int dest = -1;
  };
  const Runtime &rt_;
  const int id_;
  std::uint32_t acquisitions_ = 0;
  std::list<Outgoing> outbox_;             // a list: entries keep their address while MPI sends them
  std::list<Outgoing> abandoned_sends_;    // to failed processes: MPI may still hold the buffer
  std::vector<MPI_Request> abandoned_rma_; // RMA to failed processes: Open MPI cannot free it
};

} // namespace rmastore::internal
