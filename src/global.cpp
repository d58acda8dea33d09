#include "global.hpp"

#include <cstring>

#include "errors.hpp"
#include "fault.hpp"
#include "tx.hpp"

namespace rmastore::internal {

void GlobalVariant::check_usable() const {
  if (c_.rt.detecting() && c_.rt.failures->any()) {
    throw StoreError(STORE_ERR_PROC_FAILED, "a process of the store failed: call store_recover");
  }
}

std::vector<Copy> GlobalVariant::acquire_write(const SlotId &id, std::size_t len, std::uint64_t *version) {
  for (int attempt = 0;; ++attempt) {
    const std::vector<HolderCache> hcs = c_.cache.holders(id, version);
    std::vector<int> need;
    for (const HolderCache &hc : hcs) {
      if (!hc.can_write || hc.capacity < len) need.push_back(hc.holder);
    }
    if (need.empty()) return {hcs.begin(), hcs.end()};
    // Grants are revoked only by another writer of the same key, which the API forbids while
    // this put runs; a few rounds absorb a revocation that crossed our request.
    if (attempt == 8) throw StoreError(STORE_ERR_INTERNAL, "write grant revoked repeatedly: concurrent writers?");
    CtrlMsg m;
    m.type = MsgType::kAcquireWrite;
    m.length = len;
    for (const CtrlMsg &r : c_.engine.request(c_.app, id, need, m)) {
      if (r.status == ReplyStatus::kNoMemory) throw StoreError(STORE_ERR_NO_MEMORY, "a holder is out of memory");
      if (r.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "holder refused a write grant");
    }
  }
}

void GlobalVariant::write(const std::vector<Copy> &copies, std::uint64_t key, std::uint64_t version, std::size_t length,
                          std::uint64_t flags, const void *buf) {
  const SlotId id{key, flags_ns(flags)};
  // Taken now, not after success: if this put fails half-way, the next must not reuse the
  // version with another value (a double-buffered reader compares headers, not values).
  c_.cache.raise_version(id, version);
  const std::vector<Copy> written = c_.engine.write_copies(
      c_.app, copies, c_.engine.header(key, version, length, flags), buf, Engine::OnFailure::kThrow);
  c_.cache.after_write(id, length, written);
}

void GlobalVariant::register_key(std::uint64_t key) {
  if (c_.known.put_again(key)) return;
  std::vector<int> others;
  for (int r = 0; r < c_.rt.size; ++r) {
    if (r != c_.rt.rank) others.push_back(r);
  }
  c_.engine.announce(c_.app, key, others);
  c_.known.add(key);
}

void GlobalVariant::put(std::uint64_t key, const void *buf, std::size_t len) {
  std::uint64_t version = 0;
  const std::vector<Copy> copies = acquire_write(SlotId{key, Ns::kValue}, len, &version);
  write(copies, key, version + 1, len, make_flags(0, Ns::kValue), buf);
  // A key's first value tells everybody the key exists, so that a recovery that finds all its
  // copies gone reports it lost. Only values whose put returned are promised, so this comes
  // after the copies are written and before the put returns.
  register_key(key);
}

store_status_t GlobalVariant::get(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len) {
  const SlotId id{key, Ns::kValue};
  // The cheapest copy. A reader keeps to its copy while a put lands there: switching to another
  // copy could return an older value than the one it just read, because a put reaches its
  // copies at different times.
  const int chosen = c_.cache.read_order(id).front();
  Backoff backoff;
  for (;;) {
    switch (c_.engine.read_copy(c_.app, id, chosen, buf, capacity, len)) {
    case ReadResult::kOk:
      last_read_holder_ = chosen;
      return STORE_OK;
    case ReadResult::kNotFound:
      return STORE_ERR_NOT_FOUND;
    case ReadResult::kLost:
      return STORE_ERR_DATA_LOST;
    case ReadResult::kTruncated:
      return STORE_ERR_TRUNCATED;
    case ReadResult::kRetry:
    case ReadResult::kStale:
      break;
    }
    backoff.pause();
  }
}

void GlobalVariant::commit(const TxValues &values) {
  const std::uint64_t seq = ++tx_seq_;
  std::vector<TxItem> items;
  items.reserve(values.size());
  for (const auto &[key, value] : values) {
    TxItem it{key, &value, 0, {}, {}};
    std::uint64_t current = 0, pending = 0;
    it.value_copies = acquire_write(SlotId{key, Ns::kValue}, value.size(), &current);
    it.pending_copies = acquire_write(SlotId{key, Ns::kPending}, value.size(), &pending);
    it.version = current + 1;
    items.push_back(std::move(it));
  }
  const std::vector<std::uint64_t> record = decision_record(seq, values);
  const SlotId rid = record_slot(c_.id);
  std::uint64_t previous = 0;
  const std::vector<Copy> record_copies = acquire_write(rid, record.size() * sizeof(std::uint64_t), &previous);
  write_commit(seq, items, rid, record_copies, record,
               [this](const std::vector<Copy> &copies, std::uint64_t key, std::uint64_t version, std::size_t length,
                      std::uint64_t flags, const void *buf) { write(copies, key, version, length, flags, buf); });
  for (const TxItem &it : items) register_key(it.key);
}

void GlobalVariant::back_to_normal(bool tx_open) {
  // A reduction, not MPIX_Comm_agree: Open MPI 5.0.7's agreement sometimes returned success
  // with 0 when every process contributed 1 (4 of 150 runs of tests/test_failure --seed 1160,
  // on the third agreement after a shrink). If a process fails meanwhile, some processes may
  // have switched and others not; the failure sends all of them through store_recover, which
  // puts all in transaction mode again.
  int ok = tx_open ? 0 : 1, all = 0;
  const int rc = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c_.rt.comm);
  if (is_failure_error(rc)) throw StoreError(STORE_ERR_PROC_FAILED, "a process failed");
  check_mpi(rc, "MPI_Allreduce");
  if (!all) throw StoreError(STORE_ERR_TX_STATE, "a process has a transaction open");
  mode_ = STORE_MODE_NORMAL;
}

bool GlobalVariant::finalize_barrier() {
  // A process that dies while the others wait here is a process failure, like any other.
  const int rc = MPI_Barrier(c_.rt.comm);
  if (is_failure_error(rc)) throw StoreError(STORE_ERR_PROC_FAILED, "a process failed during store_finalize");
  check_mpi(rc, "MPI_Barrier");
  return false;
}

const store_key_t *GlobalVariant::lost_keys(const std::vector<store_key_t> &recovered, std::size_t *count) const {
  *count = recovered.size();
  return recovered.data();
}

std::vector<int> GlobalVariant::holders(std::uint64_t key) {
  // Placement changes only in store_recover.
  return c_.membership.view()->holders_of(SlotId{key, Ns::kValue});
}

} // namespace rmastore::internal
