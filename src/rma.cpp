#include "rma.hpp"

#include <sched.h>

#include <algorithm>
#include <climits>

#include "errors.hpp"

namespace rmastore::internal {
namespace {
// MPI counts are ints; larger transfers are split.
constexpr std::size_t kMaxChunk = std::size_t{1} << 30;
} // namespace

RmaWindow::RmaWindow(MPI_Comm comm) {
  MPI_Info info;
  check_mpi(MPI_Info_create(&info), "MPI_Info_create");
  // The store uses no accumulates, so MPI need not order them.
  MPI_Info_set(info, "accumulate_ordering", "none");
  const int rc = MPI_Win_create_dynamic(info, comm, &win_);
  MPI_Info_free(&info);
  check_mpi(rc, "MPI_Win_create_dynamic");
  check_mpi(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
  check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_), "MPI_Win_lock_all");
}

RmaWindow::~RmaWindow() {
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
}

void RmaWindow::attach(void *base, std::size_t bytes) {
  check_mpi(MPI_Win_attach(win_, base, static_cast<MPI_Aint>(bytes)), "MPI_Win_attach");
}

void RmaWindow::close() {
  if (win_ == MPI_WIN_NULL) return;
  check_mpi(MPI_Win_unlock_all(win_), "MPI_Win_unlock_all");
  check_mpi(MPI_Win_free(&win_), "MPI_Win_free");
}

void RequestSet::put(RmaWindow &w, int target, MPI_Aint address, const void *buf, std::size_t len) {
  const auto *p = static_cast<const char *>(buf);
  do {
    const std::size_t n = std::min(len, kMaxChunk);
    MPI_Request r;
    check_mpi(
        MPI_Rput(p, static_cast<int>(n), MPI_BYTE, target, address, static_cast<int>(n), MPI_BYTE, w.handle(), &r),
        "MPI_Rput");
    reqs_.push_back(r);
    targets_.push_back(target);
    p += n;
    address += static_cast<MPI_Aint>(n);
    len -= n;
  } while (len > 0);
}

void RequestSet::get(RmaWindow &w, int target, MPI_Aint address, void *buf, std::size_t len) {
  auto *p = static_cast<char *>(buf);
  do {
    const std::size_t n = std::min(len, kMaxChunk);
    MPI_Request r;
    check_mpi(
        MPI_Rget(p, static_cast<int>(n), MPI_BYTE, target, address, static_cast<int>(n), MPI_BYTE, w.handle(), &r),
        "MPI_Rget");
    reqs_.push_back(r);
    targets_.push_back(target);
    p += n;
    address += static_cast<MPI_Aint>(n);
    len -= n;
  } while (len > 0);
}

void RequestSet::wait_all() {
  Backoff backoff;
  while (!reqs_.empty()) {
    int done = 0;
    check_mpi(MPI_Testall(static_cast<int>(reqs_.size()), reqs_.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall");
    if (done) break;
    backoff.pause();
  }
  reqs_.clear();
  targets_.clear();
}

void Backoff::pause() {
  if (++spins_ > 64) sched_yield();
}

} // namespace rmastore::internal
