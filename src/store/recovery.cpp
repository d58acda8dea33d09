// store_recover: rebuild the store on the survivors and bring every key back to its full number
// of copies (rereplicate.hpp). See docs/failures.md for the state machine.
#include "common/ulfm.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "common/clock.hpp"
#include "common/errors.hpp"
#include "common/fault.hpp"
#include "recovery/collectives.hpp"
#include "recovery/rereplicate.hpp"
#include "store/store.hpp"

namespace rmastore::internal {
namespace {

constexpr std::uint32_t kViewMask = 0x7fff;

double seconds_since(std::int64_t t0) {
  return static_cast<double>(monotonic_ns() - t0) * 1e-9;
}

// Who survived, as this process sees it: 15 bits of a hash of the stable ids (ranks in
// `origin`) of `comm`'s processes, in their order, in *view. False if MPI could not tell: the
// caller then contributes no view, which every survivor sees as a disagreement, instead of
// leaving the agreement that the others wait in.
bool view_of(MPI_Comm comm, MPI_Group origin, std::uint32_t *view) noexcept {
  if (origin == MPI_GROUP_NULL) return false;
  MPI_Group group = MPI_GROUP_NULL;
  int n = 0;
  if (MPI_Comm_group(comm, &group) != MPI_SUCCESS) return false;
  bool ok = MPI_Group_size(group, &n) == MPI_SUCCESS;
  std::vector<int> ranks, ids;
  try {
    ranks.resize(static_cast<std::size_t>(n));
    ids.resize(static_cast<std::size_t>(n));
  } catch (...) {
    ok = false;
  }
  for (int i = 0; ok && i < n; ++i) ranks[static_cast<std::size_t>(i)] = i;
  ok = ok && MPI_Group_translate_ranks(group, n, ranks.data(), origin, ids.data()) == MPI_SUCCESS;
  MPI_Group_free(&group);
  if (!ok) return false;
  std::uint64_t h = 14695981039346656037ULL; // FNV-1a
  for (int id : ids) {
    h ^= static_cast<std::uint64_t>(id) + 1;
    h *= 1099511628211ULL;
  }
  *view = static_cast<std::uint32_t>((h ^ (h >> 15) ^ (h >> 30) ^ (h >> 45)) & kViewMask);
  return true;
}

} // namespace

store_status_t Store::recover(MPI_Comm *new_comm) {
  if (broken_) throw StoreError(STORE_ERR_MPI, kDisagree);
  end_snapshot();  // a snapshot in flight is abandoned: a process of it may have failed
  abandon_flush(); // a flush too: it completes only if every part had arrived
  Core &c = *core_;
  const std::int64_t t0 = monotonic_ns();
  if (recover_attempts_++ == 0) first_attempt_ns_ = t0;
  recover_pending_ = true;
  RMASTORE_FAULT_TIMER("recover.timer");
  RMASTORE_FAULT_POINT("recover.start");
  // Only while the runtime runs: an attempt that failed half-way left it stopped.
  if (c.rt.helper != nullptr) variant_->before_recover();
  double shrink_s = 0, window_s = 0, rerep_s = 0;
  // Kept while counting: the helper may replace the view meanwhile.
  const std::shared_ptr<const View> view = c.membership.view();
  const int before =
      static_cast<int>(std::count_if(view->rank_of_id.begin(), view->rank_of_id.end(), [](int r) { return r >= 0; }));
  bool keep_window = false;
  try {
    keep_window = shrink_and_agree(&shrink_s, before);
  } catch (const StoreError &e) {
    if (e.status() == STORE_ERR_PROC_FAILED || e.status() == STORE_ERR_RECOVER_AGAIN) return STORE_ERR_RECOVER_AGAIN;
    throw;
  }
  // From here on every survivor has the same communicator. A process that dies now can make any
  // step fail on some survivors and succeed on others (ULFM collectives are not uniform), so no
  // survivor returns on its own: a survivor that fails revokes the communicator, which makes the
  // others' collectives fail too, and all meet in one agreement on it (it works on a revoked
  // communicator) that decides the outcome for everyone alike.
  MPI_Comm dup = MPI_COMM_NULL;
  // The report and lost keys replace the last ones only when this attempt succeeds: until then
  // store_last_recovery describes the last recovery that did.
  store_recovery_t report = last_recovery_;
  std::vector<store_key_t> all_lost;
  store_status_t local = STORE_OK;
  std::string why;
  try {
    RMASTORE_FAULT_POINT("recover.after_shrink");
    rebuild_runtime(&window_s, keep_window);
    RMASTORE_FAULT_POINT("recover.after_window");
    const std::int64_t r0 = monotonic_ns();
    // The window was kept only if no process was lost (shrink_and_agree).
    Rereplication(c).run(report, all_lost, keep_window, quarantined_reported_);
    rerep_s = seconds_since(r0);
    RMASTORE_FAULT_POINT("recover.after_rereplicate");
    if (new_comm != nullptr) {
      check_recovery(MPI_Comm_dup(c.rt.comm, &dup), "MPI_Comm_dup");
      check_mpi(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    }
    RMASTORE_FAULT_POINT("recover.before_agree");
  } catch (const StoreError &e) {
    local = e.status();
    why = e.what();
  } catch (const std::bad_alloc &) {
    local = STORE_ERR_NO_MEMORY;
    why = "out of memory during re-replication";
  }
  // An MPI error of a step is a failure when MPI knows of one on the communicator (or of a
  // revocation): window creation, for one, reports a dead peer as MPI_ERR_WIN.
  const bool failed_here = local == STORE_ERR_PROC_FAILED || local == STORE_ERR_RECOVER_AGAIN ||
                           (local == STORE_ERR_MPI && failure_known(c.rt.comm));
  if (local != STORE_OK) MPIX_Comm_revoke(c.rt.comm);
  // Bit 0: this process succeeded. Bit 1: it failed for no reason but a process failure.
  int flag = (local == STORE_OK ? 1 : 0) | (local == STORE_OK || failed_here ? 2 : 0);
  const int rc = MPIX_Comm_agree(c.rt.comm, &flag);
  if (rc != MPI_SUCCESS || flag != 3) {
    if (dup != MPI_COMM_NULL) MPI_Comm_free(&dup);
    if (rc != MPI_SUCCESS || (flag & 2) != 0) return STORE_ERR_RECOVER_AGAIN;
    // Some survivor could not complete for another reason (memory, MPI): the store cannot be
    // used any more. That survivor reports its own error, every other one (also one that saw
    // only the failures this caused) that another failed.
    if (local != STORE_OK && !failed_here) throw StoreError(local, why);
    throw StoreError(STORE_ERR_PEER, "store_recover failed on another process");
  }
  // The epoch moves before any thread that takes slot locks starts: a lock word is taken and
  // released under one epoch.
  ++c.rt.epoch;
  start_threads();
  recover_pending_ = false;
  if (new_comm != nullptr) *new_comm = dup;
  variant_->after_recover();
  tx_open_ = false;
  tx_values_.clear();
  report.survivors = c.rt.size;
  report.failed = members_ - c.rt.size;
  report.shrink_seconds = shrink_s;
  report.window_seconds = window_s;
  report.rereplicate_seconds = rerep_s;
  report.total_seconds = seconds_since(first_attempt_ns_);
  report.attempts = recover_attempts_;
  lost_keys_ = std::move(all_lost);
  report.lost_keys = lost_keys_.data();
  last_recovery_ = report;
  members_ = c.rt.size;
  recover_attempts_ = 0;
  quarantined_reported_ = c.holder.slots.quarantined_bytes();
  return STORE_OK;
}

bool Store::shrink_and_agree(double *seconds, int members) {
  Runtime &rt = core_->rt;
  const std::int64_t t0 = monotonic_ns();
  stop_threads();
  core_->app.forget_abandoned();
  if (rt.ctrl != MPI_COMM_NULL) MPIX_Comm_revoke(rt.ctrl);
  MPIX_Comm_revoke(rt.comm);
  RMASTORE_FAULT_POINT("recover.after_revoke");
  bool keep = false;
  for (;;) {
    MPI_Comm shrunk = MPI_COMM_NULL;
    check_recovery(MPIX_Comm_shrink(rt.comm, &shrunk), "MPIX_Comm_shrink");
    check_mpi(MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    int size = 0;
    check_mpi(MPI_Comm_size(shrunk, &size), "MPI_Comm_size");
    // The shrunk communicator may still hold a process that failed during the shrink; the
    // agreement finds out, uniformly on every survivor. Bit 1: this process's window spans
    // exactly the survivors (an earlier attempt may have made it on some processes only).
    // Bits 2-16 and 17-31: who survived as this process sees it, and its complement. After
    // the bitwise and, they still complement each other only if every survivor saw the same.
    std::uint32_t view = 0;
    const bool known = view_of(shrunk, origin_, &view);
    if (RMASTORE_FAULT_ARMED("recover.skewed_view")) view ^= 1; // tests: a survivor that sees otherwise
    const std::uint32_t bits =
        1U | (rt.window != nullptr && size == members ? 2U : 0U) | (known ? view << 2 | (~view & kViewMask) << 17 : 0U);
    int flag = static_cast<int>(bits);
    const int rc = MPIX_Comm_agree(shrunk, &flag);
    const auto agreed = static_cast<std::uint32_t>(flag);
    const bool ok = rc == MPI_SUCCESS && (agreed & 1) != 0;
    keep = ok && (agreed & 2) != 0;
    int old_size = size;
    check_mpi(MPI_Comm_size(rt.comm, &old_size), "MPI_Comm_size");
    MPI_Comm old = rt.comm;
    rt.comm = shrunk;
    rt.retire(&old, size < old_size);
    if (ok && (((agreed >> 2) ^ (agreed >> 17)) & kViewMask) != kViewMask) {
      // Every survivor of this agreement sees this. Rebuilding on differing views would split
      // the store: it stops here for good instead, and can only be finalized.
      broken_ = true;
      throw StoreError(STORE_ERR_MPI, kDisagree);
    }
    if (ok) break;
    MPIX_Comm_revoke(rt.comm);
  }
  *seconds = seconds_since(t0);
  return keep;
}

// Retires the old window without flushing or unlocking it (that would wait on the failed), and
// creates a new one on the survivors with the same memory attached; keeps it when
// shrink_and_agree found that no process was lost.
//
// The old window is not freed: with Open MPI 5.0.7, once a dynamic window that spanned a failed
// process has been freed, creating any later window on a two-process communicator ends the
// whole job (tests/ompi_window_after_failure.c reproduces it). Unused, such a window costs
// Open MPI's bookkeeping only; MPI_Finalize frees it.
void Store::rebuild_runtime(double *seconds, bool keep_window) {
  Runtime &rt = core_->rt;
  const std::int64_t t0 = monotonic_ns();
  // With no process lost the window still spans exactly the survivors, in the same order, and
  // is kept: nothing of it is left behind (store_recover as compaction in the localized variant).
  if (!keep_window) {
    if (rt.window) rt.window->abandon();
    rt.window.reset();
  }
  rt.retire(&rt.ctrl, !keep_window);
  rt.renumber();
  std::vector<int> ids(static_cast<std::size_t>(rt.size));
  const int id = core_->id;
  check_recovery(MPI_Allgather(&id, 1, MPI_INT, ids.data(), 1, MPI_INT, rt.comm), "MPI_Allgather");
  RMASTORE_FAULT_POINT("recover.after_ids");
  core_->membership.reset(std::move(ids));
  // An unpatched Open MPI 5.0.7 segfaults when window creation meets a dead process
  // (scripts/openmpi-patches/0001-*): with a failure already known, do not even try.
  if (failure_known(rt.comm)) throw StoreError(STORE_ERR_RECOVER_AGAIN, "a process failed before window creation");
  rt.build(core_->holder.slots.regions());
  *seconds = seconds_since(t0);
}

void Store::last_recovery(store_recovery_t &out) const {
  out = last_recovery_;
  std::size_t count = 0;
  out.lost_keys = variant_->lost_keys(lost_keys_, &count);
  out.lost_count = count;
}

} // namespace rmastore::internal
