#include "transport/rma.hpp"

#include <sched.h>

#include <algorithm>
#include <climits>
#include <string>

#include "common/clock.hpp"
#include "common/errors.hpp"
#include "common/fault.hpp"
#include "transport/doorbell.hpp"
#include "transport/failure.hpp"
#include "transport/helper.hpp"

namespace rmastore::internal {
namespace {
// MPI counts are ints; larger transfers are split.
constexpr std::size_t kMaxChunk = std::size_t{1} << 30;
// An operation to a process whose application thread is inside MPI completes within a few
// microseconds plus the time to copy its bytes; one that takes longer waits for the target's
// helper, which may be asleep. Ringing earlier only disturbs a target that is progressing.
constexpr std::int64_t kRingAfterNs = 2'000;
constexpr std::int64_t kCopyBytesPerNs = 8;
constexpr std::int64_t kRingAgainNs = 20'000;
constexpr std::int64_t kRangeRetryNs = 1'000'000'000;
// How often a wait looks at the failure state: a few atomic loads, so often enough that it adds
// nothing noticeable to the detection latency (milliseconds).
constexpr std::int64_t kCheckEveryNs = 100'000;
// Over TCP the connection to a dead process breaks before ULFM reports the death, and an RMA
// call or request toward it fails with a plain error class (MPI_ERR_INTERN, seen across hosts).
// Such an error is that failure if the process is reported dead within this bound (detection
// across hosts took well under a second in docs/benchmarks.md); otherwise it is thrown.
constexpr std::int64_t kAttributeNs = 5'000'000'000;
// A wait longer than this is traced (RMASTORE_TRACE, test build) with what it still waits for;
// looked at with the failure state, not on every spin.
constexpr std::int64_t kSlowWaitNs = 1'000'000'000;
} // namespace

RmaWindow::MpiFacts RmaWindow::read_mpi_facts() {
  MpiFacts facts;
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return facts;
  int index = 0;
  facts.has_fixes = MPI_T_cvar_get_index("osc_rdma_cache_dynamic_regions", &index) == MPI_SUCCESS;
  int &limit = facts.max_regions;
  if (MPI_T_cvar_get_index("osc_rdma_max_attach", &index) == MPI_SUCCESS) {
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum enumtype;
    int verbosity = 0, bind = 0, scope = 0;
    int rc =
        MPI_T_cvar_get_info(index, nullptr, nullptr, &verbosity, &type, &enumtype, nullptr, nullptr, &bind, &scope);
    if (rc == MPI_SUCCESS && (type == MPI_INT || type == MPI_UNSIGNED)) {
      MPI_T_cvar_handle handle;
      int count = 0;
      if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS) {
        unsigned value = 0; // MPI_INT and MPI_UNSIGNED have the same size
        if (count == 1 && MPI_T_cvar_read(handle, &value) == MPI_SUCCESS && value > 0 && value <= INT_MAX) {
          limit = static_cast<int>(value);
        }
        MPI_T_cvar_handle_free(&handle);
      }
    }
  }
  MPI_T_finalize();
  return facts;
}

const RmaWindow::MpiFacts &RmaWindow::mpi_facts() {
  // Read once per process: MPI_T_init_thread registers every MCA variable again, which costs
  // about 45,000 allocations and leaks some of them (heaptrack, Open MPI 5.0.7). Both are fixed
  // when MPI starts.
  static const MpiFacts facts = read_mpi_facts();
  return facts;
}

RmaWindow::RmaWindow(MPI_Comm comm) {
  max_regions_ = mpi_facts().max_regions;
  MPI_Info info;
  check_mpi(MPI_Info_create(&info), "MPI_Info_create");
  // The store uses no accumulates, so MPI need not order them.
  int rc = MPI_Info_set(info, "accumulate_ordering", "none");
  // The store never detaches memory while the window lives, so a peer's region table as last
  // read stays valid: with Open MPI's osc/rdma patched by scripts/openmpi-patches/0011, an
  // operation toward another host then costs one round trip instead of two. Other MPIs ignore
  // the key.
  if (rc == MPI_SUCCESS) rc = MPI_Info_set(info, "cache_dynamic_regions", "true");
  if (rc == MPI_SUCCESS) rc = MPI_Win_create_dynamic(info, comm, &win_);
  MPI_Info_free(&info);
  check_mpi(rc, "MPI_Win_create_dynamic");
  check_mpi(MPI_Win_set_errhandler(win_, MPI_ERRORS_RETURN), "MPI_Win_set_errhandler");
  check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, win_), "MPI_Win_lock_all");
}

RmaWindow::~RmaWindow() {
  if (win_ != MPI_WIN_NULL) MPI_Win_free(&win_);
}

void RmaWindow::attach(void *base, std::size_t bytes) {
  if (regions_ >= max_regions_) {
    throw StoreError(STORE_ERR_NO_MEMORY, "the window has " + std::to_string(regions_) +
                                              " memory regions, the most the MPI library allows (osc_rdma_max_attach)");
  }
  const int rc = MPI_Win_attach(win_, base, static_cast<MPI_Aint>(bytes));
  if (rc != MPI_SUCCESS) {
    // Failed attaches are resource shortages (registration, the region table): the memory
    // could not be made available.
    int cls = MPI_SUCCESS;
    MPI_Error_class(rc, &cls);
    if (cls == MPI_ERR_RMA_ATTACH || cls == MPI_ERR_NO_MEM) {
      throw StoreError(STORE_ERR_NO_MEMORY, "MPI_Win_attach could not attach more memory");
    }
    check_mpi(rc, "MPI_Win_attach");
  }
  ++regions_;
}

void RmaWindow::close() {
  if (win_ == MPI_WIN_NULL) return;
  check_mpi(MPI_Win_unlock_all(win_), "MPI_Win_unlock_all");
  check_mpi(MPI_Win_free(&win_), "MPI_Win_free");
}

RequestSet::~RequestSet() {
  if (reqs_.empty()) return;
  try {
    wait_all();
  } catch (...) {
    // Pending requests were given up or failed: nothing better to do than to stop waiting.
  }
}

void RequestSet::add(MPI_Request r, int target, Kind kind, std::size_t bytes) {
  reqs_.push_back(r);
  targets_.push_back(target);
  kinds_.push_back(kind);
  largest_ = std::max(largest_, bytes);
}

void RequestSet::put(RmaWindow &w, int target, MPI_Aint address, const void *buf, std::size_t len) {
  issue(w, true, target, address, const_cast<void *>(buf), len);
}

void RequestSet::get(RmaWindow &w, int target, MPI_Aint address, void *buf, std::size_t len) {
  issue(w, false, target, address, buf, len);
}

void RequestSet::issue(RmaWindow &w, bool is_put, int target, MPI_Aint address, void *buf, std::size_t len) {
  auto *p = static_cast<char *>(buf);
  do {
    const int n = static_cast<int>(std::min(len, kMaxChunk));
    MPI_Request r;
    // Open MPI 5.0.7's osc/rdma searches a same-node target's table of attached regions in
    // place, without its lock (osc_rdma_dynamic.c, ompi_osc_rdma_find_dynamic_region), while
    // MPI_Win_attach or MPI_Win_detach on the target moves its entries: an operation issued
    // meanwhile fails with MPI_ERR_RMA_RANGE although its address is attached (10 to 60 puts in
    // 3 s in each run of tests/ompi_region_table_readers.c, unpatched). The Open MPI that
    // scripts/setup.sh builds has it fixed (patch 0008); other builds do not. Every address used
    // here was granted by the target after attaching it, so this error is that race: retry.
    const std::int64_t give_up = monotonic_ns() + kRangeRetryNs;
    for (;;) {
      const int rc = is_put ? MPI_Rput(p, n, MPI_BYTE, target, address, n, MPI_BYTE, w.handle(), &r)
                            : MPI_Rget(p, n, MPI_BYTE, target, address, n, MPI_BYTE, w.handle(), &r);
      int cls = MPI_SUCCESS;
      if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
      if (cls != MPI_ERR_RMA_RANGE || monotonic_ns() > give_up) {
        if (failure_of(rc, target)) {
          failed_ = true; // the wait ends in STORE_ERR_PROC_FAILED
          return;
        }
        check_mpi(rc, is_put ? "MPI_Rput" : "MPI_Rget");
        break;
      }
      sched_yield();
    }
    add(r, target, Kind::kRma, static_cast<std::size_t>(n));
    p += n;
    address += n;
    len -= static_cast<std::size_t>(n);
  } while (len > 0);
}

bool RequestSet::failure_of(int rc, int target) {
  if (rc == MPI_SUCCESS) return false;
  if (is_failure_error(rc)) return true;
  if (ctx_ == nullptr) return false;
  const std::int64_t asked = monotonic_ns();
  bool failed = false;
  for (;;) {
    failed = ctx_->revoked() ||
             (target >= 0 ? ctx_->dead(target)
                          : std::any_of(targets_.begin(), targets_.end(), [&](int t) { return ctx_->dead(t); }));
    if (failed || monotonic_ns() - asked > kAttributeNs) break;
    ctx_->check();
    sched_yield();
  }
  RMASTORE_TRACE("error %d toward %d %s after %lld ms", rc, target, failed ? "is a failure" : "is no failure",
                 static_cast<long long>((monotonic_ns() - asked) / 1'000'000));
  return failed;
}

void RequestSet::give_up(std::size_t i) {
  MPI_Request &r = reqs_[i];
  if (r == MPI_REQUEST_NULL) return;
  if (kinds_[i] == Kind::kRecv) {
    // A cancelled receive completes locally, and then MPI will never write into its buffer.
    MPI_Cancel(&r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  } else if (ctx_ != nullptr) {
    RMASTORE_TRACE("abandons rma request to %d", targets_[i]);
    ctx_->abandon(r);
  }
  r = MPI_REQUEST_NULL;
  failed_ = true;
}

// MPI_Testall failed. ULFM reports failures and revocation as errors; MPI has already freed a
// request that completed in error, so its status is the only trace: the wait must end in
// STORE_ERR_PROC_FAILED, or its buffer would be taken for a result. Any other error is thrown.
void RequestSet::sort_out_errors(int rc, const std::vector<MPI_Status> &statuses) {
  int cls = MPI_SUCCESS;
  MPI_Error_class(rc, &cls);
  if (cls != MPI_ERR_IN_STATUS) {
    if (!failure_of(rc, -1)) check_mpi(rc, "MPI_Testall");
    failed_ = true;
  } else {
    for (std::size_t i = 0; i < reqs_.size(); ++i) {
      const int e = statuses[i].MPI_ERROR;
      if (e == MPI_SUCCESS || e == MPI_ERR_PENDING) continue;
      if (!failure_of(e, targets_[i])) check_mpi(e, "MPI_Testall");
      failed_ = true;
      if (reqs_[i] != MPI_REQUEST_NULL) give_up(i);
    }
  }
  // Requests still pending whose peers failed: found by testing them one by one.
  for (std::size_t i = 0; i < reqs_.size(); ++i) {
    if (reqs_[i] == MPI_REQUEST_NULL) continue;
    int flag = 0;
    const int e = MPI_Test(&reqs_[i], &flag, MPI_STATUS_IGNORE);
    if (e == MPI_SUCCESS) continue;
    if (!failure_of(e, targets_[i])) check_mpi(e, "MPI_Test");
    failed_ = true;
    if (reqs_[i] != MPI_REQUEST_NULL) give_up(i);
  }
}

void RequestSet::wait_all() {
  Backoff backoff;
  Doorbells *bells = ctx_ != nullptr ? ctx_->bells() : nullptr;
  const auto copy_ns = static_cast<std::int64_t>(largest_) / kCopyBytesPerNs;
  const std::int64_t start = monotonic_ns();
  std::int64_t next_ring = start + kRingAfterNs + copy_ns;
  std::int64_t next_check = start + kCheckEveryNs;
  std::vector<MPI_Status> statuses(reqs_.size());
  bool reported_slow = false;
  while (!reqs_.empty()) {
    int done = 0;
    const int rc = MPI_Testall(static_cast<int>(reqs_.size()), reqs_.data(), &done, statuses.data());
    if (rc != MPI_SUCCESS) {
      sort_out_errors(rc, statuses);
      continue;
    }
    if (done) break;
    const std::int64_t now = monotonic_ns();
    if (bells != nullptr && now >= next_ring) {
      int last = -1;
      for (std::size_t i = 0; i < reqs_.size(); ++i) {
        if (reqs_[i] != MPI_REQUEST_NULL && targets_[i] != last) bells->ring(targets_[i]);
        last = targets_[i];
      }
      next_ring = now + std::max(kRingAgainNs, copy_ns / 2);
    }
    if (ctx_ != nullptr && now >= next_check) {
      if (now - start > kSlowWaitNs && !reported_slow) {
        reported_slow = true;
        for (std::size_t i = 0; i < reqs_.size(); ++i) {
          if (reqs_[i] == MPI_REQUEST_NULL) continue;
          RMASTORE_TRACE("a wait is slow: %s to %d pending after %lld ms", kinds_[i] == Kind::kRma ? "rma" : "recv",
                         targets_[i], static_cast<long long>((now - start) / 1'000'000));
        }
      }
      ctx_->check();
      const bool revoked = ctx_->revoked();
      for (std::size_t i = 0; i < reqs_.size(); ++i) {
        if (reqs_[i] == MPI_REQUEST_NULL) continue;
        // RMA to a live process completes even after a revocation: it is served by the
        // target's progress engine, not by its helper.
        if (ctx_->dead(targets_[i]) || (revoked && kinds_[i] != Kind::kRma)) give_up(i);
      }
      next_check = now + kCheckEveryNs;
    }
    backoff.pause();
  }
  reqs_.clear();
  targets_.clear();
  kinds_.clear();
  largest_ = 0;
  if (failed_) {
    failed_ = false;
    throw StoreError(STORE_ERR_PROC_FAILED, "a process this operation needed has failed");
  }
}

void Backoff::pause() {
  if (++spins_ > 64) sched_yield();
}

} // namespace rmastore::internal
