#include "variants/localized/localized.hpp"

#include <time.h>

#include <algorithm>
#include <iterator>
#include <optional>
#include <set>

#include "common/clock.hpp"
#include "common/errors.hpp"
#include "common/fault.hpp"
#include "variants/tx.hpp"

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
  const std::vector<SlotId> orphaned = c_.holder.locks.after_failures();
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

void LocalizedVariant::on_message(const CtrlMsg &msg, int source) {
  if (msg.type == MsgType::kRevoke) locks_.on_revoke(msg, source);
  if (msg.type == MsgType::kRepairNeeded && repairer_) repairer_->request(slot_of(msg));
  // RMASTORE_FAULT_OFF=lost_notice (test build): the notice never arrives, so that a test can show
  // that a get's own verdict keeps this process's loss list complete (tests/test_failure.cpp).
  if (msg.type == MsgType::kLost && !RMASTORE_FAULT_OFF("lost_notice")) c_.holder.witnesses.mark_lost(msg.key);
}

std::vector<Copy> LocalizedVariant::write(const std::vector<Copy> &copies, std::uint64_t key, std::uint64_t version,
                                          std::size_t length, std::uint64_t flags, const void *buf) {
  std::vector<Copy> written = c_.engine.write_copies(c_.app, copies, c_.engine.header(key, version, length, flags), buf,
                                                     Engine::OnFailure::kSkip);
  all_written(written.size(), copies.size());
  return written;
}

// A holder that failed under the write: this process may learn of it only now, while others
// already repaired the key onto a new holder (a cached lock to the dead holder asks nothing).
// The operation starts over on the new placement rather than leave a copy short.
void LocalizedVariant::all_written(std::size_t written, std::size_t copies) {
  if (written < copies) throw StoreError(STORE_ERR_PROC_FAILED, "a holder failed during the write");
}

void LocalizedVariant::record(const std::vector<std::uint64_t> &keys, MsgType type) {
  c_.engine.record(c_.app, type, keys, *c_.membership.view());
}

store_status_t LocalizedVariant::lost_here(std::uint64_t key) {
  c_.holder.witnesses.mark_lost(key);
  return STORE_ERR_DATA_LOST;
}

template <class Requests>
std::optional<std::vector<Lock>> LocalizedVariant::lock_attempt(Retry &retry, Requests &&requests, bool cache) {
  c_.app.flush();
  c_.membership.follow(*c_.rt.failures);
  try {
    return locks_.acquire(c_.app, requests(), nullptr, cache);
  } catch (const StoreError &e) {
    if (retry.after(e)) return std::nullopt;
    throw;
  }
}

template <class Work>
bool LocalizedVariant::under_locks(Retry &retry, std::vector<Lock> &locks, Work &&work, std::uint32_t unlock_flags) {
  return under_locks_then(retry, locks, work, [&] { locks_.release(c_.app, locks, unlock_flags); });
}

template <class Work, class Done>
bool LocalizedVariant::under_locks_then(Retry &retry, std::vector<Lock> &locks, Work &&work, Done &&done) {
  try {
    work();
  } catch (const StoreError &e) {
    locks_.release(c_.app, locks);
    if (retry.after(e)) return false;
    throw;
  }
  done();
  return true;
}

store_status_t LocalizedVariant::confirm_absent(std::uint64_t key) {
  const SlotId id{key, Ns::kValue};
  Retry retry(c_);
  for (;;) {
    // Slots are made where there are none, or a first put could start and finish between the
    // look at the holders and the question to the witnesses.
    std::optional<std::vector<Lock>> taken = lock_attempt(retry, [&] { return locks_.requests(id, 0, 0); });
    if (!taken) continue;
    std::vector<Lock> &locks = *taken;
    // A complete copy: read again. A pending copy (a transaction whose committer failed): its
    // repair decides, read again after it. A tombstone: deleted. A lost marker: lost. Nothing but
    // empty (or torn) slots: the records decide.
    bool live = false, deleted = false, lost = false, empty = true;
    for (const Lock &l : locks) {
      const std::uint32_t f = l.grant.flags;
      const bool pending = (f & kReplyHasPending) != 0 && l.grant.pending_version != kNoVersion;
      live = live || (f & kReplyLive) != 0 || pending;
      deleted = deleted || (f & kReplyDeleted) != 0;
      lost = lost || (f & kReplyLost) != 0;
      empty = empty && !pending && (f & kReplyValid) != 0 && l.grant.version == kNoVersion && (f & kReplyLost) == 0;
    }
    store_status_t verdict = live ? STORE_OK : deleted ? STORE_ERR_NOT_FOUND : STORE_ERR_DATA_LOST;
    // Slots that hold nothing (made for this question, or by a put that died before writing) go
    // again.
    if (under_locks(
            retry, locks,
            [&] {
              if (!live && !deleted && !lost &&
                  !c_.engine.tell_witnesses(c_.app, MsgType::kWitnessQuery,
                                            {{key, c_.membership.view()->keepers_of(key)}})) {
                verdict = STORE_ERR_NOT_FOUND;
              }
            },
            empty ? kUnlockReclaim | kUnlockDropPending : 0)) {
      return verdict;
    }
  }
}

namespace {

// The copies of one slot that `locks` lock, and in *newest the newest version among them
// (pending ones included): a write goes one above it.
std::vector<Copy> copies_of(const std::vector<Lock> &locks, std::uint64_t *newest) {
  std::vector<Copy> copies;
  for (const Lock &l : locks) {
    *newest = std::max(*newest, l.newest_version());
    copies.push_back(l.copy());
  }
  return copies;
}

} // namespace

void LocalizedVariant::put(std::uint64_t key, const void *buf, std::size_t len) {
  const SlotId id{key, Ns::kValue};
  // Each new attempt follows a failure that changed placement or hit a holder. Once an attempt
  // found a holder without a complete copy, the records are owed until some attempt wrote them:
  // a later attempt finds the copies the failed one left.
  Retry retry(c_);
  bool owe_record = false;
  for (;;) {
    std::optional<std::vector<Lock>> taken = lock_attempt(
        retry, [&] { return locks_.requests(id, len, 0); }, /*cache=*/true);
    if (!taken) continue;
    std::vector<Lock> &locks = *taken;
    std::uint64_t version = kNoVersion;
    const std::vector<Copy> copies = copies_of(locks, &version);
    for (const Lock &l : locks) owe_record = owe_record || (l.grant.flags & kReplyLive) == 0;
    std::vector<Copy> written;
    // A failure here (every copy's holder failed during the put): the key's new holders get it.
    // The locks stay cached for the next put of the key (locks.hpp).
    if (under_locks_then(
            retry, locks,
            [&] {
              written = write(copies, key, version + 1, len, make_flags(0, Ns::kValue), buf);
              if (owe_record) record({key});
            },
            [&] {
              locks_.keep(c_.app, locks, [&](const Lock &l, CtrlMsg &g) {
                const Copy *w = LockClient::written_at(written, l.req.holder);
                if (w != nullptr) LockClient::set_value(g, *w, version + 1, len);
                return w != nullptr;
              });
            })) {
      break;
    }
  }
  c_.holder.witnesses.clear_lost(key);
}

// Under the locks of the slots that exist: a tombstone newer than every copy, then the records
// go, then the unlocks free the slots (those a locker waits for keep the tombstone, which it
// writes over). A deleter that dies leaves its locks to a repair, which finishes the delete if a
// tombstone is the newest copy left, and keeps the old value otherwise.
void LocalizedVariant::del(std::uint64_t key) {
  const SlotId id{key, Ns::kValue};
  Retry retry(c_);
  for (;;) {
    std::optional<std::vector<Lock>> taken =
        lock_attempt(retry, [&] { return locks_.requests(id, 0, kRequestNoCreate); });
    if (!taken) continue;
    std::vector<Lock> &locks = *taken;
    std::uint64_t version = kNoVersion;
    const std::vector<Copy> copies = copies_of(locks, &version);
    if (under_locks(
            retry, locks,
            [&] {
              if (!copies.empty()) write(copies, key, version + 1, 0, make_flags(kFlagDeleted, Ns::kValue), nullptr);
              RMASTORE_FAULT_POINT("delete.after_tombstone");
              record({key}, MsgType::kUnwitness);
              RMASTORE_FAULT_POINT("delete.before_reclaim");
            },
            kUnlockReclaim | kUnlockDropPending)) {
      break;
    }
  }
  c_.holder.witnesses.clear_lost(key);
}

// As put, for many keys at once: their locks in one round (in the global lock order, so a busy
// one makes acquire take them one at a time), every value written before any write is waited
// for, the records owed in one round, then the unlocks.
void LocalizedVariant::put_many(const std::vector<PutItem> &all) {
  std::vector<PutItem> sorted = all;
  std::sort(sorted.begin(), sorted.end(), [](const PutItem &a, const PutItem &b) { return a.key < b.key; });
  for (std::size_t first = 0; first < sorted.size(); first += kBatchKeys) {
    const std::size_t n = std::min(kBatchKeys, sorted.size() - first);
    const PutItem *items = sorted.data() + first;
    Retry retry(c_);
    std::set<std::uint64_t> owed;
    for (;;) {
      std::optional<std::vector<Lock>> taken = lock_attempt(retry, [&] {
        std::vector<LockRequest> reqs;
        for (std::size_t i = 0; i < n; ++i) {
          for (const LockRequest &r : locks_.requests(SlotId{items[i].key, Ns::kValue}, items[i].len, 0))
            reqs.push_back(r);
        }
        return reqs;
      });
      if (!taken) continue;
      std::vector<Lock> &locks = *taken;
      // The locks come in request order: each key's holders together.
      std::vector<Engine::WriteJob> jobs(n);
      std::vector<std::uint64_t> versions(n, kNoVersion);
      std::size_t i = 0;
      for (const Lock &l : locks) {
        while (items[i].key != l.req.id.key) ++i;
        versions[i] = std::max(versions[i], l.newest_version());
        jobs[i].copies.push_back(l.copy());
        if ((l.grant.flags & kReplyLive) == 0) owed.insert(items[i].key);
      }
      for (std::size_t k = 0; k < n; ++k) {
        jobs[k].header = c_.engine.header(items[k].key, versions[k] + 1, items[k].len, make_flags(0, Ns::kValue));
        jobs[k].buf = items[k].buf;
      }
      if (under_locks(retry, locks, [&] {
            std::vector<std::size_t> asked;
            for (const Engine::WriteJob &j : jobs) asked.push_back(j.copies.size());
            c_.engine.write_many(c_.app, jobs, Engine::OnFailure::kSkip);
            for (std::size_t k = 0; k < n; ++k) all_written(jobs[k].copies.size(), asked[k]);
            record({owed.begin(), owed.end()});
          })) {
        break;
      }
    }
    for (std::size_t k = 0; k < n; ++k) c_.holder.witnesses.clear_lost(items[k].key);
  }
}

// The first copy of each key read as get reads it, all at once; a key whose read needs more (a
// put landed meanwhile, a holder failed or is new) goes through get.
void LocalizedVariant::get_many(std::vector<GetItem> &items) {
  for (std::size_t first = 0; first < items.size(); first += kBatchKeys) {
    const std::size_t n = std::min(kBatchKeys, items.size() - first);
    c_.membership.follow(*c_.rt.failures);
    const bool after_failure = c_.rt.failures->failures() > 0;
    std::vector<Engine::ReadJob> jobs;
    for (std::size_t i = first; i < first + n; ++i) {
      const SlotId id{items[i].key, Ns::kValue};
      jobs.push_back(Engine::ReadJob{id, c_.cache.read_order(id).front(), items[i].buf, items[i].capacity});
    }
    bool batched = true;
    try {
      c_.engine.read_many(c_.app, jobs);
    } catch (const StoreError &e) {
      if (e.status() != STORE_ERR_PROC_FAILED || c_.rt.failures->revoked()) throw;
      batched = false; // a holder failed: each key as get reads it, from the surviving copies
    }
    for (std::size_t j = 0; j < n; ++j) {
      GetItem &it = items[first + j];
      const Engine::ReadJob &job = jobs[j];
      it.len = job.len;
      const ReadResult r = batched ? job.result : ReadResult::kRetry;
      if (r == ReadResult::kOk) {
        it.status = STORE_OK;
        last_read_holder_ = job.holder;
      } else if (r == ReadResult::kTruncated) {
        it.status = STORE_ERR_TRUNCATED;
      } else if (r == ReadResult::kLost) {
        it.status = lost_here(it.key);
      } else if (r == ReadResult::kDeleted || (r == ReadResult::kNotFound && !after_failure)) {
        it.status = STORE_ERR_NOT_FOUND;
      } else {
        it.status = get(it.key, it.buf, it.capacity, &it.len);
      }
    }
  }
}

std::vector<std::uint64_t> LocalizedVariant::list(std::uint64_t first, std::uint64_t last, std::size_t limit,
                                                  bool *more) {
  // A process that fails meanwhile takes nothing along that a survivor does not keep too, unless
  // it was the last keeper of a key: the survivors are asked again.
  Retry retry(c_);
  for (;;) {
    std::vector<int> ranks;
    for (int r = 0; r < c_.rt.size; ++r) {
      if (!c_.rt.failures->dead(r)) ranks.push_back(r);
    }
    try {
      return c_.engine.list(c_.app, first, last, limit, ranks, more);
    } catch (const StoreError &e) {
      if (!retry.after(e)) throw;
    }
  }
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
      if (r == ReadResult::kLost) return lost_here(key);
      // A tombstone is the newest state of the key, or a put under way has not reached it yet.
      if (r == ReadResult::kDeleted) return STORE_ERR_NOT_FOUND;
      if (r == ReadResult::kRetry || r == ReadResult::kStale) {
        again = true;
        break;
      }
      if (!after_failure) return STORE_ERR_NOT_FOUND; // kNotFound: with no failure, one answer will do
    }
    // No holder has a copy, a lost marker or a deletion: the key was lost before the repair
    // marked it, or never put, or a put is under way.
    if (!again) {
      const store_status_t st = confirm_absent(key);
      if (st == STORE_ERR_DATA_LOST) return lost_here(key);
      if (st != STORE_OK) return st;
      again = true; // a copy is there now: read it
    }
    backoff.pause();
  }
}

// The commit steps of tx.hpp under the locks of every value slot (which also guard the key's
// pending slot) and of the decision record, taken in the global lock order. Holders that fail
// during the commit are skipped; if the committer fails, the repairs of its keys decide from its
// record (repair.cpp).
void LocalizedVariant::commit(const TxValues &values) {
  Retry retry(c_);
  std::set<std::uint64_t> owed; // keys whose records are owed (as in put)
  for (;;) {
    c_.app.flush();
    c_.membership.follow(*c_.rt.failures);
    const std::uint64_t seq = ++tx_seq_;
    const std::vector<std::uint64_t> contents = decision_record(seq, values);
    std::vector<LockRequest> reqs;
    for (const auto &[key, op] : values) {
      for (const LockRequest &r : locks_.requests(SlotId{key, Ns::kValue}, op.bytes.size(), kLockPending))
        reqs.push_back(r);
    }
    const SlotId rid = record_slot(c_.id);
    for (const LockRequest &r : locks_.requests(rid, contents.size() * sizeof(std::uint64_t), 0)) reqs.push_back(r);
    std::vector<Lock> locks;
    try {
      locks = locks_.acquire(c_.app, reqs, nullptr, /*cache=*/true);
    } catch (const StoreError &e) {
      if (retry.after(e)) continue;
      throw;
    }
    std::vector<TxItem> items;
    CommitWrites written;
    try {
      // The locks come in request order: each key's holders together, the record's last.
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
        if ((l.grant.flags & kReplyLive) == 0 && !it.op->del) owed.insert(it.key);
        it.version = std::max(it.version, l.newest_version());
        it.value_copies.push_back(l.copy());
        it.pending_copies.push_back(l.pending_copy());
      }
      for (TxItem &it : items) ++it.version; // above every copy's, pending ones included
      written = write_commit(seq, items, rid, record_copies, contents, c_.engine,
                             [this](std::vector<Engine::WriteJob> &jobs, void (*between)()) {
                               std::vector<std::size_t> asked;
                               for (const Engine::WriteJob &j : jobs) asked.push_back(j.copies.size());
                               c_.engine.write_many(c_.app, jobs, Engine::OnFailure::kSkip, between);
                               for (std::size_t k = 0; k < jobs.size(); ++k)
                                 all_written(jobs[k].copies.size(), asked[k]);
                             });
      record({owed.begin(), owed.end()});
      std::vector<std::uint64_t> deleted;
      for (const auto &[key, op] : values) {
        if (op.del) deleted.push_back(key);
      }
      record(deleted, MsgType::kUnwitness);
    } catch (const StoreError &e) {
      locks_.release(c_.app, locks);
      // Every copy of some slot failed during the commit: start over on the new holders (with a
      // new sequence number, so the half-written attempt's pending values stay undecided).
      if (retry.after(e)) continue;
      throw;
    }
    // A deleted key's slots go with their locks, as in del(); the other locks stay cached, as a
    // put's do, with the grants of what the commit wrote.
    std::vector<Lock> kept;
    for (const Lock &l : locks) {
      if (l.req.id.ns == Ns::kValue && values.at(l.req.id.key).del) {
        locks_.release(c_.app, {l}, kUnlockReclaim | kUnlockDropPending);
      } else {
        kept.push_back(l);
      }
    }
    locks_.keep(c_.app, kept, [&](const Lock &l, CtrlMsg &g) {
      if (l.req.id.ns == Ns::kTxRecord) {
        const Copy *w = LockClient::written_at(written.record.front().copies, l.req.holder);
        if (w != nullptr) LockClient::set_value(g, *w, seq, contents.size() * sizeof(std::uint64_t));
        return w != nullptr;
      }
      const auto at = static_cast<std::size_t>(
          std::find_if(items.begin(), items.end(), [&](const TxItem &it) { return it.key == l.req.id.key; }) -
          items.begin());
      const Copy *v = LockClient::written_at(written.values[at].copies, l.req.holder);
      const Copy *p = LockClient::written_at(written.pending[at].copies, l.req.holder);
      if (v == nullptr || p == nullptr) return false;
      const TxItem &it = items[at];
      LockClient::set_value(g, *v, it.version, it.op->bytes.size());
      g.flags = (g.flags & ~kReplyPendingDeleted) | kReplyHasPending | kReplyPendingValid;
      g.pending_version = it.version;
      g.pending_length = it.op->bytes.size();
      g.pending_half = p->half_b ? 1 : 0;
      g.pending_tx = seq;
      g.pending_writer = static_cast<std::uint32_t>(c_.id);
      return true;
    });
    for (const auto &kv : values) c_.holder.witnesses.clear_lost(kv.first);
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
void LocalizedVariant::give_back_locks() {
  locks_.drop_cached(c_.app);
  c_.app.drain();
}

bool LocalizedVariant::finalize_barrier() {
  give_back_locks(); // a process still putting may wait for one
  return tolerant_barrier(c_.rt.comm, *c_.rt.failures) > 0;
}

// store_recover as compaction: every survivor is here before any helper stops, so none is left
// inside a put, waiting for a helper that will not answer.
void LocalizedVariant::before_recover() {
  // The holders forget every lock in the compaction; given back first, since a survivor may
  // still be inside a put that waits for one.
  give_back_locks();
  tolerant_barrier(c_.rt.comm, *c_.rt.failures);
  RMASTORE_FAULT_POINT("recover.after_barrier");
}

const store_key_t *LocalizedVariant::lost_keys(const std::vector<store_key_t> &recovered, std::size_t *count) const {
  // Also the keys the background repairs found lost, until they are put again.
  const std::vector<std::uint64_t> repaired = c_.holder.witnesses.lost(); // sorted, without duplicates
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
