// RMA transport: one dynamic window, one passive-target epoch for its whole life
// (MPI_Win_lock_all with MPI_MODE_NOCHECK), and request-based puts and gets.
//
// Completion is never awaited with MPI_Win_flush or MPI_Wait: both block without bound when the
// target has died (measured on Open MPI 5.0.7, see docs/design.md). Instead every operation is a
// request (MPI_Rput/MPI_Rget) polled with MPI_Testall by the caller, who can give up on a
// target. In Open MPI's osc/rdma, an MPI_Rput request completes only when the target
// acknowledged the data, i.e. at remote completion; tests/test_remote_completion checks that
// this holds. Between processes the data lands while the target's helper thread polls MPI
// (transport/helper.hpp), woken by a doorbell when it sleeps.
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

  // Throws StoreError(STORE_ERR_NO_MEMORY), without asking MPI, once the window holds as many
  // regions as the MPI library allows: Open MPI 5.0.7's osc/rdma fails the
  // attach beyond its limit while keeping its region lock, after which every later attach on
  // the window spins forever (osc_rdma_dynamic.c, ompi_osc_rdma_attach).
  void attach(void *base, std::size_t bytes);
  // Ends the epoch and frees the window (collective). Only valid when no request is pending.
  void close();
  // Forgets the window without freeing it (see Store::rebuild_runtime); MPI_Finalize frees it.
  void abandon() { win_ = MPI_WIN_NULL; }

  MPI_Win handle() const { return win_; }

  // Used when the MPI library does not expose osc_rdma_max_attach: the smallest limit of Open
  // MPI's one-sided components (osc/ucx has a fixed 32 in some releases).
  static constexpr int kFallbackMaxRegions = 32;

  // What the MPI library says of itself through its tool interface, read once per process.
  struct MpiFacts {
    // The number of regions a dynamic window may have: Open MPI's osc_rdma_max_attach, else
    // kFallbackMaxRegions.
    int max_regions = kFallbackMaxRegions;
    // Open MPI with the fixes of scripts/openmpi-patches: its osc/rdma has the variable that
    // patch 0011 adds (the newest; setup.sh applies all of them or none).
    bool has_fixes = false;
  };
  static const MpiFacts &mpi_facts();

private:
  static MpiFacts read_mpi_facts();

  MPI_Win win_ = MPI_WIN_NULL;
  int regions_ = 0; // every MPI_Win_attach on this window, whoever asked for it
  int max_regions_ = kFallbackMaxRegions;
};

// What a wait needs to know about the other processes. Implemented by each client thread's
// Agent (client/agent.hpp).
class WaitContext {
public:
  virtual ~WaitContext() = default;
  // The process is known to have failed: its requests can never complete.
  virtual bool dead(int rank) const = 0;
  // Replies will not come: the store's communicators were revoked, or the waiter must start
  // over (a lock wait after placement changed, a repair thread that stops).
  virtual bool revoked() const = 0;
  // Keeps an RMA request that will never complete: Open MPI cannot free it.
  virtual void abandon(MPI_Request r) = 0;
  // Throws if waiting cannot end (e.g. this process's helper thread stopped).
  virtual void check() const = 0;
  virtual Doorbells *bells() const = 0;
};

// Outstanding requests (RMA, or receives of replies from holders), each tagged with its target.
//
// Never waits without bound on a process that may be dead: wait_all polls, and gives up on the
// requests to a process once `ctx` reports it dead (receives are cancelled, RMA is abandoned),
// and on every receive once `ctx` reports revoked(); then it finishes the others and throws
// STORE_ERR_PROC_FAILED. RMA to live processes is always waited for, so MPI never writes into a
// buffer after the call returned. Buffers given to it must stay valid until wait_all returns;
// the destructor waits too.
class RequestSet {
public:
  enum class Kind : unsigned char { kRma, kRecv };

  explicit RequestSet(WaitContext *ctx) : ctx_(ctx) {}
  ~RequestSet();
  RequestSet(const RequestSet &) = delete;
  RequestSet &operator=(const RequestSet &) = delete;

  void add(MPI_Request r, int target, Kind kind, std::size_t bytes);
  void put(RmaWindow &w, int target, MPI_Aint address, const void *buf, std::size_t len);
  void get(RmaWindow &w, int target, MPI_Aint address, void *buf, std::size_t len);
  // Polls until every request completed. Targets that take longer than a few microseconds plus
  // the copy time get their helper woken (ctx->bells()), and again while they stay incomplete.
  void wait_all();
  bool empty() const { return reqs_.empty(); }

private:
  void issue(RmaWindow &w, bool is_put, int target, MPI_Aint address, void *buf, std::size_t len);
  void give_up(std::size_t i);
  // Whether error rc of an operation toward target (-1: any of this set's) comes from a failure.
  bool failure_of(int rc, int target);
  void sort_out_errors(int rc, const std::vector<MPI_Status> &statuses);

  WaitContext *ctx_;
  std::vector<MPI_Request> reqs_;
  std::vector<int> targets_;
  std::vector<Kind> kinds_;
  std::size_t largest_ = 0; // bytes of the largest pending operation
  bool failed_ = false;     // a request was given up: the wait ends in STORE_ERR_PROC_FAILED
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
