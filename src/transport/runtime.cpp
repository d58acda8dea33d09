#include "transport/runtime.hpp"

#include "common/errors.hpp"
#include "common/fault.hpp"

namespace rmastore::internal {

Runtime::Runtime(MPI_Comm c, int det, int sleep_us) : comm(c), detector(det), helper_max_sleep_us(sleep_us) {
  renumber();
}

void Runtime::renumber() {
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
}

void Runtime::build(const std::vector<SlotAllocator::Region> &regions) {
  check_mpi(MPI_Comm_dup(comm, &ctrl), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(ctrl, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  // Fault points on each collective step, so that tests can kill a process at every stage of
  // the rebuild store_recover does.
  RMASTORE_FAULT_POINT("runtime.after_ctrl_dup");
  failures = std::make_unique<FailureState>(size);
  RMASTORE_FAULT_POINT("runtime.before_window");
  // A recovery that lost no process keeps its window (store_recover).
  if (!window) {
    window = std::make_unique<RmaWindow>(comm);
    for (const SlotAllocator::Region &r : regions) window->attach(r.base, r.bytes);
  }
  RMASTORE_FAULT_POINT("runtime.before_bells");
  bells = std::make_unique<Doorbells>(comm);
  helper = std::make_unique<Helper>(ctrl, *bells, *failures, detector, helper_max_sleep_us);
}

void Runtime::stop_helper() {
  if (helper) helper->stop();
  helper.reset();
  bells.reset();
}

void Runtime::retire(MPI_Comm *c, bool spanned_failed) {
  if (*c == MPI_COMM_NULL) return;
  if (!spanned_failed) {
    MPI_Comm_free(c);
  } else {
    retired.push_back(*c);
  }
  *c = MPI_COMM_NULL;
}

void Runtime::free_retired() noexcept {
  for (MPI_Comm &c : retired) MPI_Comm_free(&c);
  retired.clear();
}

void Runtime::check_helper() const {
  if (helper->failed()) throw StoreError(STORE_ERR_MPI, "helper thread stopped: " + helper->failure());
}

} // namespace rmastore::internal
