// Transactions: all or nothing across process failures (see include/rmastore/store.h).
//
// Commit, for a transaction T of this process:
//   1. write grants for every key's value and for its pending slot (namespace kPending);
//   2. every value goes to the pending slots of its holders, tagged with T;
//   3. the decision record (namespace kTxRecord, named by this process, version T) is written
//      to its holders. This is the commit point: a record on any survivor means committed;
//   4. every value goes to its value slots.
// store_recover resolves what a failure interrupted (recovery.cpp): pending values of a
// committed T that are newer than the key's value are rolled forward, all others discarded.
#include <cstring>

#include "errors.hpp"
#include "fault.hpp"
#include "store.hpp"

namespace rmastore::internal {

void Store::tx_begin() {
  require_healthy();
  if (tx_open_) throw StoreError(STORE_ERR_TX_STATE, "a transaction is already open");
  tx_open_ = true;
  tx_values_.clear();
}

void Store::tx_abort() {
  if (!tx_open_) throw StoreError(STORE_ERR_TX_STATE, "no transaction is open");
  tx_open_ = false;
  tx_values_.clear();
}

void Store::tx_commit() {
  if (!tx_open_) throw StoreError(STORE_ERR_TX_STATE, "no transaction is open");
  // Closed whatever happens below: a failed commit is decided by store_recover.
  tx_open_ = false;
  const std::map<std::uint64_t, std::vector<std::byte>> values = std::move(tx_values_);
  tx_values_.clear();
  require_healthy();
  if (values.empty()) return;
  if (localized()) {
    tx_commit_localized(values);
    return;
  }
  const std::uint64_t seq = ++tx_seq_;

  std::vector<TxItem> items;
  items.reserve(values.size());
  for (const auto &[key, value] : values) {
    TxItem it{key, &value, 0, {}, {}};
    std::uint64_t current = 0, pending = 0;
    it.value_copies = acquire_write(*app_, SlotId{key, Ns::kValue}, value.size(), &current);
    it.pending_copies = acquire_write(*app_, SlotId{key, Ns::kPending}, value.size(), &pending);
    it.version = current + 1;
    items.push_back(std::move(it));
  }
  const std::vector<std::uint64_t> record = decision_record(seq, values);
  const SlotId rid{static_cast<std::uint64_t>(id_), Ns::kTxRecord};
  std::uint64_t previous = 0;
  const std::vector<HolderCache> record_copies =
      acquire_write(*app_, rid, record.size() * sizeof(std::uint64_t), &previous);
  write_commit(seq, items, rid, record_copies, record, false);
  for (const TxItem &it : items) register_key(*app_, it.key);
}

// Steps 2 to 4 of the commit (top of this file), with their fault points. `tolerant`: copies
// whose holder failed are skipped (localized variant).
void Store::write_commit(std::uint64_t seq, const std::vector<TxItem> &items, const SlotId &rid,
                         const std::vector<HolderCache> &record_copies, const std::vector<std::uint64_t> &record,
                         bool tolerant) {
  const auto write = [&](const std::vector<HolderCache> &copies, std::uint64_t key, std::uint64_t version,
                         std::size_t length, std::uint64_t flags, const void *data) {
    SlotHeader h{};
    h.key = key;
    h.version = version;
    h.length = length;
    h.flags = flags;
    write_copies(*app_, copies, h, data, tolerant);
  };
  RMASTORE_FAULT_POINT("tx.before_pending");
  bool first = true;
  for (const TxItem &it : items) {
    if (!first) RMASTORE_FAULT_POINT("tx.between_pending");
    first = false;
    write(it.pending_copies, it.key, it.version, it.value->size(), make_flags(0, Ns::kPending, seq), it.value->data());
  }
  RMASTORE_FAULT_POINT("tx.before_record");
  write(record_copies, rid.key, seq, record.size() * sizeof(std::uint64_t), make_flags(0, Ns::kTxRecord),
        record.data());
  RMASTORE_FAULT_POINT("tx.after_record");
  first = true;
  for (const TxItem &it : items) {
    if (!first) RMASTORE_FAULT_POINT("tx.during_apply");
    first = false;
    write(it.value_copies, it.key, it.version, it.value->size(), make_flags(0, Ns::kValue), it.value->data());
  }
}

// The decision record names the keys, for diagnosis; recovery needs only its version.
std::vector<std::uint64_t> Store::decision_record(std::uint64_t seq,
                                                  const std::map<std::uint64_t, std::vector<std::byte>> &values) {
  std::vector<std::uint64_t> record;
  record.push_back(seq);
  for (const auto &kv : values) record.push_back(kv.first);
  return record;
}

// Localized variant: the same steps under the locks of every value slot (which also guard the
// key's pending slot) and of the decision record, taken in the global lock order. Holders that
// fail during the commit are skipped; if the committer fails, the repairs of its keys decide
// from its record (repair.cpp).
void Store::tx_commit_localized(const std::map<std::uint64_t, std::vector<std::byte>> &values) {
  Retry retry(*this);
  for (;;) {
    app_->flush();
    update_view();
    const std::uint64_t seq = ++tx_seq_;
    const std::vector<std::uint64_t> record = decision_record(seq, values);
    std::vector<LockRequest> reqs;
    for (const auto &[key, value] : values) {
      for (const LockRequest &r : lock_requests(SlotId{key, Ns::kValue}, value.size(), kLockPending)) reqs.push_back(r);
    }
    const SlotId rid{static_cast<std::uint64_t>(id_), Ns::kTxRecord};
    for (const LockRequest &r : lock_requests(rid, record.size() * sizeof(std::uint64_t), 0)) reqs.push_back(r);
    std::vector<Lock> locks;
    try {
      locks = acquire_locks(*app_, reqs);
    } catch (const StoreError &e) {
      if (retry.after(e)) continue;
      throw;
    }
    try {
      // The locks come in request order: each key's holders together, the record's last.
      std::vector<TxItem> items;
      std::vector<HolderCache> record_copies;
      for (const Lock &l : locks) {
        if (l.req.id.ns == Ns::kTxRecord) {
          record_copies.push_back(as_copy(l));
          continue;
        }
        if (items.empty() || items.back().key != l.req.id.key) {
          items.push_back(TxItem{l.req.id.key, &values.at(l.req.id.key), kNoVersion, {}, {}});
        }
        TxItem &it = items.back();
        it.version = std::max(it.version, newest_version(l));
        it.value_copies.push_back(as_copy(l));
        it.pending_copies.push_back(as_pending_copy(l));
      }
      for (TxItem &it : items) ++it.version; // above every copy's, pending ones included
      write_commit(seq, items, rid, record_copies, record, true);
    } catch (const StoreError &e) {
      release_locks(*app_, locks);
      // Every copy of some slot failed during the commit: start over on the new holders (with a
      // new sequence number, so the half-written attempt's pending values stay undecided).
      if (retry.after(e)) continue;
      throw;
    }
    release_locks(*app_, locks);
    for (const auto &kv : values) register_key(*app_, kv.first);
    return;
  }
}

void Store::back_to_normal() {
  if (localized()) {
    // No modes, and the communicator may hold failed processes: nothing to agree on.
    if (tx_open_) throw StoreError(STORE_ERR_TX_STATE, "a transaction is open");
    return;
  }
  // A reduction, not MPIX_Comm_agree: Open MPI 5.0.7's agreement sometimes returned success
  // with 0 when every process contributed 1 (4 of 150 runs of tests/test_failure --seed 1160,
  // on the third agreement after a shrink). If a process fails meanwhile, some processes may
  // have switched and others not; the failure sends all of them through store_recover, which
  // puts all in transaction mode again.
  int ok = tx_open_ ? 0 : 1, all = 0;
  const int rc = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm_);
  if (is_failure_error(rc)) throw StoreError(STORE_ERR_PROC_FAILED, "a process failed");
  check_mpi(rc, "MPI_Allreduce");
  if (!all) throw StoreError(STORE_ERR_TX_STATE, "a process has a transaction open");
  mode_ = STORE_MODE_NORMAL;
}

} // namespace rmastore::internal
