// Failure detection: which processes of the store's communicator are known to have failed, and
// whether the communicator was revoked (some survivor started store_recover).
//
// ULFM tells a process about a failure only while one of its threads is inside MPI. The helper
// thread is always polling a receive from MPI_ANY_SOURCE on the control communicator; when a
// process dies, that receive reports MPIX_ERR_PROC_FAILED_PENDING (measured 6-10 ms after a
// kill), and the helper records the failed set here. Every store call and every wait reads it
// with a few atomic loads, no communication.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace rmastore::internal {

class FailureState {
public:
  explicit FailureState(int size);

  bool dead(int rank) const {
    return rank >= 0 && rank < size_ && dead_[static_cast<std::size_t>(rank)].load(std::memory_order_acquire) != 0;
  }
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }
  // Anything that makes the store need store_recover.
  bool any() const { return failures_.load(std::memory_order_acquire) > 0 || revoked(); }
  int failures() const { return failures_.load(std::memory_order_acquire); }
  // When the first failure or revocation was seen (CLOCK_MONOTONIC ns), 0 if none.
  std::int64_t first_seen_ns() const { return first_seen_ns_.load(std::memory_order_acquire); }

  void mark_dead(int rank);
  void mark_revoked();

private:
  void seen_now();

  int size_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> dead_;
  std::atomic<int> failures_{0};
  std::atomic<bool> revoked_{false};
  std::atomic<std::int64_t> first_seen_ns_{0};
};

// Records the processes of `comm` that MPI knows to have failed; returns their number.
int record_failures(MPI_Comm comm, FailureState &state);

// Records the failed processes of `comm` and acknowledges them, so that a pending
// MPI_ANY_SOURCE receive on `comm` reports only newer failures.
void absorb_failures(MPI_Comm comm, FailureState &state);

// A barrier over the live processes of `comm`, which may hold failed ones, and may lose more
// meanwhile. Point-to-point (tag 78 on `comm`); it records the failures it meets in `state`.
// Returns the most failures any survivor knew of when it entered, or this process knows now.
int tolerant_barrier(MPI_Comm comm, FailureState &state);

// True for the error classes by which ULFM reports a failure or a revocation.
bool is_failure_error(int rc);
// For a collective over the store's processes: a failure or revocation it met is
// STORE_ERR_PROC_FAILED ("a process failed during <what>"), any other error check_mpi's.
void check_collective(int rc, const char *call, const char *what);

} // namespace rmastore::internal
