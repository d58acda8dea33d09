#include "transport/failure.hpp"

#include <sched.h>

#include <algorithm>
#include <vector>

#include "common/ulfm.hpp"

#include "common/clock.hpp"
#include "common/errors.hpp"
#include "common/fault.hpp"

namespace rmastore::internal {

FailureState::FailureState(int size)
    : size_(size), dead_(new std::atomic<std::uint8_t>[static_cast<std::size_t>(size)]) {
  for (int i = 0; i < size; ++i) dead_[static_cast<std::size_t>(i)].store(0, std::memory_order_relaxed);
}

void FailureState::seen_now() {
  std::int64_t zero = 0;
  first_seen_ns_.compare_exchange_strong(zero, monotonic_ns(), std::memory_order_acq_rel);
}

void FailureState::mark_dead(int rank) {
  if (rank < 0 || rank >= size_) return;
  if (dead_[static_cast<std::size_t>(rank)].exchange(1, std::memory_order_acq_rel) == 0) {
    seen_now();
    failures_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void FailureState::mark_revoked() {
  seen_now();
  revoked_.store(true, std::memory_order_release);
}

int record_failures(MPI_Comm comm, FailureState &state) {
  MPI_Group failed = MPI_GROUP_NULL, all = MPI_GROUP_NULL;
  if (MPIX_Comm_get_failed(comm, &failed) != MPI_SUCCESS) return 0;
  int n = 0;
  MPI_Group_size(failed, &n);
  if (n > 0 && MPI_Comm_group(comm, &all) == MPI_SUCCESS) {
    std::vector<int> in(static_cast<std::size_t>(n)), out(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) in[static_cast<std::size_t>(i)] = i;
    if (MPI_Group_translate_ranks(failed, n, in.data(), all, out.data()) == MPI_SUCCESS) {
      for (int r : out) {
        if (!state.dead(r)) RMASTORE_TRACE("learns that rank %d failed", r);
        state.mark_dead(r);
      }
    }
    MPI_Group_free(&all);
  }
  MPI_Group_free(&failed);
  return n;
}

void absorb_failures(MPI_Comm comm, FailureState &state) {
  const int n = record_failures(comm, state);
  int acked = 0;
  MPIX_Comm_ack_failed(comm, n, &acked);
}

// Every live process sends a token (the number of failures it knows) to every process it does
// not know to be dead and waits for a token from each of them, or for its death. A process is
// known dead only after it died, so every survivor hears from every survivor. Not
// MPIX_Comm_agree: in Open MPI 5.0.7 the agreement segfaulted in
// ompi_errhandler_proc_failed_internal at store_finalize after two deaths (1 in 24 runs), while
// the helper thread progressed MPI: the defect that scripts/openmpi-patches/0010 fixes, which
// stock releases still have.
int tolerant_barrier(MPI_Comm comm, FailureState &state) {
  constexpr int kTag = 78;
  int size = 0, rank = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  record_failures(comm, state);
  // MPI may still read the token after a send to a process that died is let go: it is freed
  // only when every send completed.
  auto *token = new int(state.failures());
  bool let_go = false;
  std::vector<int> in(static_cast<std::size_t>(size), 0);
  std::vector<MPI_Request> recvs(static_cast<std::size_t>(size), MPI_REQUEST_NULL);
  std::vector<MPI_Request> sends(static_cast<std::size_t>(size), MPI_REQUEST_NULL);
  for (int r = 0; r < size; ++r) {
    if (r == rank || state.dead(r)) continue;
    const auto i = static_cast<std::size_t>(r);
    int rc = MPI_Irecv(&in[i], 1, MPI_INT, r, kTag, comm, &recvs[i]);
    if (rc != MPI_SUCCESS && !is_failure_error(rc)) check_mpi(rc, "MPI_Irecv");
    rc = MPI_Isend(token, 1, MPI_INT, r, kTag, comm, &sends[i]);
    if (rc != MPI_SUCCESS && !is_failure_error(rc)) check_mpi(rc, "MPI_Isend");
  }
  const auto settled = [&](MPI_Request &req, int r, bool receive) {
    if (req == MPI_REQUEST_NULL) return true;
    int done = 0;
    const int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS && !is_failure_error(rc)) check_mpi(rc, "MPI_Test");
    if (rc == MPI_SUCCESS && done) return true;
    if (rc == MPI_SUCCESS && !state.dead(r)) return false;
    // The peer died: a receive is cancelled (it completes locally), a send is left to MPI.
    if (req == MPI_REQUEST_NULL) return true;
    if (receive) {
      MPI_Cancel(&req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
      MPI_Request_free(&req);
      let_go = true;
    }
    return true;
  };
  for (;;) {
    record_failures(comm, state);
    int pending = 0;
    for (int r = 0; r < size; ++r) {
      const auto i = static_cast<std::size_t>(r);
      if (!settled(recvs[i], r, true)) ++pending;
    }
    if (pending == 0) break;
    sched_yield();
  }
  for (bool all = false; !all; sched_yield()) {
    record_failures(comm, state);
    all = true;
    for (int r = 0; r < size; ++r) all = settled(sends[static_cast<std::size_t>(r)], r, false) && all;
  }
  if (!let_go) delete token;
  return std::max(state.failures(), *std::max_element(in.begin(), in.end()));
}

bool is_failure_error(int rc) {
  if (rc == MPI_SUCCESS) return false;
  int cls = MPI_SUCCESS;
  MPI_Error_class(rc, &cls);
  return cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_PROC_FAILED_PENDING || cls == MPIX_ERR_REVOKED;
}

void check_collective(int rc, const char *call, const char *what) {
  if (is_failure_error(rc)) throw StoreError(STORE_ERR_PROC_FAILED, std::string("a process failed during ") + what);
  check_mpi(rc, call);
}

} // namespace rmastore::internal
