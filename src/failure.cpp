#include "failure.hpp"

#include "ulfm.hpp"

#include "errors.hpp"
#include "fault.hpp"
#include "helper.hpp"

namespace rmastore::internal {

FailureState::FailureState(int size)
    : size_(size), dead_(new std::atomic<std::uint8_t>[static_cast<std::size_t>(size)]) {
  for (int i = 0; i < size; ++i) dead_[static_cast<std::size_t>(i)].store(0, std::memory_order_relaxed);
}

void FailureState::seen_now() {
  std::int64_t zero = 0;
  first_seen_ns_.compare_exchange_strong(zero, Helper::now_ns(), std::memory_order_acq_rel);
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

// A barrier over the live processes of a communicator that may hold failed ones: they are
// acknowledged, then the survivors agree, again if more fail meanwhile.
void tolerant_barrier(MPI_Comm comm) {
  for (;;) {
    MPI_Group failed = MPI_GROUP_NULL;
    check_mpi(MPIX_Comm_get_failed(comm, &failed), "MPIX_Comm_get_failed");
    int n = 0, acked = 0;
    MPI_Group_size(failed, &n);
    MPI_Group_free(&failed);
    check_mpi(MPIX_Comm_ack_failed(comm, n, &acked), "MPIX_Comm_ack_failed");
    int flag = 1;
    const int rc = MPIX_Comm_agree(comm, &flag);
    if (rc == MPI_SUCCESS) return;
    if (!is_failure_error(rc)) check_mpi(rc, "MPIX_Comm_agree");
  }
}

bool is_failure_error(int rc) {
  if (rc == MPI_SUCCESS) return false;
  int cls = MPI_SUCCESS;
  MPI_Error_class(rc, &cls);
  return cls == MPIX_ERR_PROC_FAILED || cls == MPIX_ERR_PROC_FAILED_PENDING || cls == MPIX_ERR_REVOKED;
}

} // namespace rmastore::internal
