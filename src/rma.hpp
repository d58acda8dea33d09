// RMA transport: one dynamic window, one passive-target epoch for its whole life
// (MPI_Win_lock_all with MPI_MODE_NOCHECK), and request-based puts and gets.
//
// Completion is never awaited with MPI_Win_flush or MPI_Wait: both block without bound when the
// target has died (measured on Open MPI 5.0.7, see docs/design.md). Instead every operation is a
// request (MPI_Rput/MPI_Rget) polled with MPI_Test by the caller, who can give up on a target.
// In Open MPI's osc/rdma, an MPI_Rput request completes only when the target acknowledged the
// data, i.e. at remote completion; tests/test_remote_completion checks that this holds.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace rmastore::internal {

class Doorbells;

class RmaWindow {
public:
  explicit RmaWindow(MPI_Comm comm);
  ~RmaWindow();
  RmaWindow(const RmaWindow &) = delete;
  RmaWindow &operator=(const RmaWindow &) = delete;

  void attach(void *base, std::size_t bytes);
  // Ends the epoch and frees the window (collective). Only valid when no request is pending.
  void close();

  MPI_Win handle() const { return win_; }

private:
  MPI_Win win_ = MPI_WIN_NULL;
};

// Outstanding requests (RMA, or point-to-point with the holders), each tagged with its target.
// Buffers given to it must stay valid until wait_all returns; if the set is destroyed with
// requests pending (an exception unwinds), it waits for them first so that MPI never writes into
// or reads from memory that was given back.
class RequestSet {
public:
  RequestSet() = default;
  ~RequestSet();
  RequestSet(const RequestSet &) = delete;
  RequestSet &operator=(const RequestSet &) = delete;

  void add(MPI_Request r, int target, std::size_t bytes);
  void put(RmaWindow &w, int target, MPI_Aint address, const void *buf, std::size_t len);
  void get(RmaWindow &w, int target, MPI_Aint address, void *buf, std::size_t len);
  // Polls until every request completed. Targets that take longer than a few microseconds plus
  // the copy time get their helper woken through `bells` (may be null), and again while they
  // stay incomplete. `check` (may be empty) runs every millisecond or so and may throw to stop
  // waiting; the requests then stay pending, and the destructor waits for them.
  void wait_all(Doorbells *bells, const std::function<void()> &check = {});
  bool empty() const { return reqs_.empty(); }

private:
  void issue(RmaWindow &w, bool is_put, int target, MPI_Aint address, void *buf, std::size_t len);

  std::vector<MPI_Request> reqs_;
  std::vector<int> targets_;
  std::size_t largest_ = 0; // bytes of the largest pending operation
};

// Spin-wait helper: polls `done` and yields the core now and then, because the process that has
// to make progress for us may share it (oversubscribed runs).
class Backoff {
public:
  void pause();

private:
  unsigned spins_ = 0;
};

} // namespace rmastore::internal
