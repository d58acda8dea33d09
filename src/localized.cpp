#include "localized.hpp"

#include <time.h>

#include <algorithm>
#include <iterator>

#include "clock.hpp"
#include "errors.hpp"
#include "fault.hpp"
#include "tx.hpp"

namespace rmastore::internal {

LocalizedVariant::~LocalizedVariant() {
  stop();
}

// The repairer exists before the helper starts and until it has stopped: the helper's failure
// handling hands it work.
std::function<void()> LocalizedVariant::start() {
  repairer_ = std::make_unique<Repairer>(c_, locks_);
  repairer_->start();
  return [this] { on_failures(); };
}

void LocalizedVariant::stop() {
  if (repairer_) repairer_->stop();
}

bool LocalizedVariant::Retry::after(const StoreError &e) {
  if (e.status() != STORE_ERR_PROC_FAILED || c_.rt.failures->revoked()) return false;
  record_failures(c_.rt.ctrl, *c_.rt.failures);
  c_.membership.follow(*c_.rt.failures);
  const int now = c_.rt.failures->failures();
  const std::int64_t t = monotonic_ns();
  if (deadline_ == 0) deadline_ = t + 30'000'000'000;
  if (now == seen_) {
    if (t > deadline_) return false;
    timespec nap{0, 200'000};
    nanosleep(&nap, nullptr);
  }
  seen_ = now;
  return true;
}

void LocalizedVariant::on_failures() {
  c_.membership.follow(*c_.rt.failures);
  const std::vector<SlotId> orphaned = c_.table.after_failures();
  // Asked again after every failure: the coordinator asked before may be among the failed.
  const std::shared_ptr<const View> view = c_.membership.view();
  for (const SlotId &id : orphaned) {
    const std::vector<int> hs = view->holders_of(id);
    const int coordinator = hs.empty() ? c_.rt.rank : hs.front();
    RMASTORE_TRACE("%llu/%u has a dead owner: repair asked of rank %d", (unsigned long long)id.key,
                   static_cast<unsigned>(id.ns), coordinator);
    if (coordinator == c_.rt.rank) {
      if (repairer_) repairer_->request(id);
      continue;
    }
    CtrlMsg m;
    m.type = MsgType::kRepairNeeded;
    m.ns = static_cast<std::uint32_t>(id.ns);
    m.key = id.key;
    c_.rt.helper->send(coordinator, kTagHelper, m);
  }
  if (repairer_) repairer_->view_changed();
}

void LocalizedVariant::on_message(const CtrlMsg &msg) {
  if (msg.type == MsgType::kRepairNeeded && repairer_) repairer_->request(slot_of(msg));
  if (msg.type == MsgType::kLost) c_.known.mark_lost(msg.key);
}

std::vector<Copy> LocalizedVariant::write(const std::vector<Copy> &copies, std::uint64_t key, std::uint64_t version,
                                          std::size_t length, std::uint64_t flags, const void *buf) {
  return c_.engine.write_copies(c_.app, copies, c_.engine.header(key, version, length, flags), buf,
                                Engine::OnFailure::kSkip);
}

void LocalizedVariant::register_key(std::uint64_t key) {
  if (c_.known.put_again(key)) return;
  Retry retry(c_);
  for (;;) {
    std::vector<int> others;
    for (int r = 0; r < c_.rt.size; ++r) {
      if (r != c_.rt.rank && !c_.rt.failures->dead(r)) others.push_back(r);
    }
    try {
      c_.engine.announce(c_.app, key, others);
      break;
    } catch (const StoreError &e) {
      if (!retry.after(e)) throw;
    }
  }
  c_.known.add(key);
}

void LocalizedVariant::put(std::uint64_t key, const void *buf, std::size_t len) {
  const SlotId id{key, Ns::kValue};
  // Each new attempt follows a failure that changed placement or hit a holder.
  Retry retry(c_);
  for (;;) {
    c_.app.flush();
    c_.membership.follow(*c_.rt.failures);
    std::vector<Lock> locks;
    try {
      locks = locks_.acquire(c_.app, locks_.requests(id, len, 0), nullptr);
    } catch (const StoreError &e) {
      if (retry.after(e)) continue;
      throw;
    }
    std::uint64_t version = kNoVersion;
    std::vector<Copy> copies;
    for (const Lock &l : locks) {
      version = std::max(version, l.newest_version());
      copies.push_back(l.copy());
    }
    try {
      write(copies, key, version + 1, len, make_flags(0, Ns::kValue), buf);
    } catch (const StoreError &e) {
      locks_.release(c_.app, locks);
      // Every copy's holder failed during the put: the key's new holders get it.
      if (retry.after(e)) continue;
      throw;
    }
    locks_.release(c_.app, locks);
    break;
  }
  // As in the global variant: the key exists everywhere once its first put returns.
  register_key(key);
}

// A holder may have failed, or be new and not have the key yet (the repair is under way): then
// the other holders are asked before the answer is "not found", and a key this process knows
// existed, of which no holder has a copy, is reported lost.
store_status_t LocalizedVariant::get(std::uint64_t key, void *buf, std::size_t capacity, std::size_t *len) {
  const SlotId id{key, Ns::kValue};
  Backoff backoff;
  Retry retry(c_);
  for (;;) {
    c_.membership.follow(*c_.rt.failures);
    const bool after_failure = c_.rt.failures->failures() > 0;
    bool again = false;
    for (const int holder : c_.cache.read_order(id)) {
      ReadResult r;
      try {
        r = c_.engine.read_copy(c_.app, id, holder, buf, capacity, len);
      } catch (const StoreError &e) {
        // The holder failed: placement changes, and the next round reads another copy.
        if (!retry.after(e)) throw;
        again = true;
        break;
      }
      if (r == ReadResult::kOk) {
        last_read_holder_ = holder;
        return STORE_OK;
      }
      if (r == ReadResult::kTruncated) return STORE_ERR_TRUNCATED;
      if (r == ReadResult::kLost) return STORE_ERR_DATA_LOST;
      if (r == ReadResult::kRetry || r == ReadResult::kStale) {
        again = true;
        break;
      }
      if (!after_failure) return STORE_ERR_NOT_FOUND; // kNotFound: with no failure, one answer will do
    }
    if (!again) return c_.known.known_or_lost(key) ? STORE_ERR_DATA_LOST : STORE_ERR_NOT_FOUND;
    backoff.pause();
  }
}

// The commit steps of tx.hpp under the locks of every value slot (which also guard the key's
// pending slot) and of the decision record, taken in the global lock order. Holders that fail
// during the commit are skipped; if the committer fails, the repairs of its keys decide from its
// record (repair.cpp).
void LocalizedVariant::commit(const TxValues &values) {
  Retry retry(c_);
  for (;;) {
    c_.app.flush();
    c_.membership.follow(*c_.rt.failures);
    const std::uint64_t seq = ++tx_seq_;
    const std::vector<std::uint64_t> record = decision_record(seq, values);
    std::vector<LockRequest> reqs;
    for (const auto &[key, value] : values) {
      for (const LockRequest &r : locks_.requests(SlotId{key, Ns::kValue}, value.size(), kLockPending))
        reqs.push_back(r);
    }
    const SlotId rid = record_slot(c_.id);
    for (const LockRequest &r : locks_.requests(rid, record.size() * sizeof(std::uint64_t), 0)) reqs.push_back(r);
    std::vector<Lock> locks;
    try {
      locks = locks_.acquire(c_.app, reqs, nullptr);
    } catch (const StoreError &e) {
      if (retry.after(e)) continue;
      throw;
    }
    try {
      // The locks come in request order: each key's holders together, the record's last.
      std::vector<TxItem> items;
      std::vector<Copy> record_copies;
      for (const Lock &l : locks) {
        if (l.req.id.ns == Ns::kTxRecord) {
          record_copies.push_back(l.copy());
          continue;
        }
        if (items.empty() || items.back().key != l.req.id.key) {
          items.push_back(TxItem{l.req.id.key, &values.at(l.req.id.key), kNoVersion, {}, {}});
        }
        TxItem &it = items.back();
        it.version = std::max(it.version, l.newest_version());
        it.value_copies.push_back(l.copy());
        it.pending_copies.push_back(l.pending_copy());
      }
      for (TxItem &it : items) ++it.version; // above every copy's, pending ones included
      write_commit(seq, items, rid, record_copies, record,
                   [this](const std::vector<Copy> &copies, std::uint64_t key, std::uint64_t version, std::size_t length,
                          std::uint64_t flags, const void *buf) { write(copies, key, version, length, flags, buf); });
    } catch (const StoreError &e) {
      locks_.release(c_.app, locks);
      // Every copy of some slot failed during the commit: start over on the new holders (with a
      // new sequence number, so the half-written attempt's pending values stay undecided).
      if (retry.after(e)) continue;
      throw;
    }
    locks_.release(c_.app, locks);
    for (const auto &kv : values) register_key(kv.first);
    return;
  }
}

void LocalizedVariant::back_to_normal(bool tx_open) {
  // No modes, and the communicator may hold failed processes: nothing to agree on.
  if (tx_open) throw StoreError(STORE_ERR_TX_STATE, "a transaction is open");
}

// The communicator may hold failed processes: a barrier that tolerates them, which also tells
// every process whether any of them knew of a failure, so that all decide alike how to let go
// of the window.
bool LocalizedVariant::finalize_barrier() {
  return tolerant_barrier(c_.rt.comm, *c_.rt.failures) > 0;
}

// store_recover as compaction: every survivor is here before any helper stops, so none is left
// inside a put, waiting for a helper that will not answer.
void LocalizedVariant::before_recover() {
  c_.app.drain();
  tolerant_barrier(c_.rt.comm, *c_.rt.failures);
  RMASTORE_FAULT_POINT("recover.after_barrier");
}

const store_key_t *LocalizedVariant::lost_keys(const std::vector<store_key_t> &recovered, std::size_t *count) const {
  // Also the keys the background repairs found lost, until they are put again.
  const std::vector<std::uint64_t> repaired = c_.known.lost(); // sorted, without duplicates
  std::vector<store_key_t> mine(recovered.begin(), recovered.end());
  std::sort(mine.begin(), mine.end());
  lost_report_.clear();
  std::set_union(repaired.begin(), repaired.end(), mine.begin(), mine.end(), std::back_inserter(lost_report_));
  *count = lost_report_.size();
  return lost_report_.data();
}

void LocalizedVariant::stats(store_info_t &out) const {
  if (repairer_) repairer_->stats(out);
}

std::vector<int> LocalizedVariant::holders(std::uint64_t key) {
  c_.membership.follow(*c_.rt.failures);
  return c_.membership.view()->holders_of(SlotId{key, Ns::kValue});
}

} // namespace rmastore::internal
