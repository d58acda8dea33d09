#include "variants/global/global.hpp"

#include <algorithm>
#include <cstring>

#include "common/errors.hpp"
#include "common/fault.hpp"
#include "variants/tx.hpp"

namespace rmastore::internal {

void GlobalVariant::check_usable() const {
  if (c_.rt.detecting() && c_.rt.failures->any()) {
    throw StoreError(STORE_ERR_PROC_FAILED, "a process of the store failed: call store_recover");
  }
}

GlobalVariant::Grants GlobalVariant::acquire_write(const SlotId &id, std::size_t len, std::uint64_t *version) {
  Grants g;
  for (int attempt = 0;; ++attempt) {
    const std::vector<HolderCache> hcs = c_.cache.holders(id, version);
    std::vector<int> need;
    for (const HolderCache &hc : hcs) {
      if (!hc.can_write || hc.capacity < len) need.push_back(hc.holder);
    }
    if (need.empty()) {
      g.copies.assign(hcs.begin(), hcs.end());
      return g;
    }
    g.asked = true;
    // Grants are revoked only by another writer of the same key, which the API forbids while
    // this put runs; a few rounds absorb a revocation that crossed our request.
    if (attempt == 8) throw StoreError(STORE_ERR_INTERNAL, "write grant revoked repeatedly: concurrent writers?");
    CtrlMsg m;
    m.type = MsgType::kAcquireWrite;
    m.length = len;
    // request() installs the grants in the cache: the next round finds them there and returns.
    for (const CtrlMsg &r : c_.engine.request(c_.app, id, need, m)) {
      if (r.status == ReplyStatus::kNoMemory) throw StoreError(STORE_ERR_NO_MEMORY, "a holder is out of memory");
      if (r.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "holder refused a write grant");
      g.fresh = g.fresh || (r.flags & kReplyLive) == 0;
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

void GlobalVariant::record(const std::vector<std::uint64_t> &keys, MsgType type) {
  c_.engine.record(c_.app, type, keys, *c_.membership.view());
  if (type != MsgType::kWitness) return;
  for (std::uint64_t key : keys) c_.cache.set_witnessed(SlotId{key, Ns::kValue});
}

std::vector<Copy> GlobalVariant::existing_grants(const SlotId &id, std::uint64_t *version) {
  std::vector<Copy> out;
  std::vector<int> need;
  for (const HolderCache &hc : c_.cache.holders(id, version)) {
    if (hc.can_write) {
      out.push_back(hc);
    } else {
      need.push_back(hc.holder);
    }
  }
  if (need.empty()) return out;
  CtrlMsg m;
  m.type = MsgType::kAcquireWrite;
  m.flags = kRequestNoCreate;
  const std::vector<CtrlMsg> replies = c_.engine.request(c_.app, id, need, m);
  for (std::size_t i = 0; i < replies.size(); ++i) {
    const CtrlMsg &r = replies[i];
    if (r.status == ReplyStatus::kNotFound) continue;
    if (r.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "holder refused a write grant");
    Copy c;
    c.holder = need[i];
    c.address = r.address;
    c.capacity = r.capacity;
    c.length_hint = r.length;
    c.half_b = r.half != 0;
    out.push_back(c);
    *version = std::max(*version, r.version);
  }
  return out;
}

void GlobalVariant::reclaim(std::uint64_t key, std::uint64_t version) {
  c_.cache.forget(key);
  CtrlMsg m;
  m.type = MsgType::kReclaim;
  m.key = key;
  m.version = version;
  for (int h : c_.membership.view()->holders_of(SlotId{key, Ns::kValue})) {
    if (h == c_.rt.rank) {
      c_.holder.grants.serve_reclaim(m, h);
    } else {
      c_.app.post(h, m);
    }
  }
}

void GlobalVariant::del(std::uint64_t key) {
  // The grants of both slots end other processes' grants (a writer ordered after this delete
  // asks again), and a tombstone newer than every copy goes where a slot exists: a delete that
  // stops half-way leaves the old value or the tombstone, which store_recover decides between.
  std::uint64_t version = 0, pending = 0;
  const std::vector<Copy> copies = existing_grants(SlotId{key, Ns::kValue}, &version);
  (void)existing_grants(SlotId{key, Ns::kPending}, &pending);
  const std::uint64_t tombstone = std::max(version, pending) + 1;
  if (!copies.empty()) write(copies, key, tombstone, 0, make_flags(kFlagDeleted, Ns::kValue), nullptr);
  RMASTORE_FAULT_POINT("delete.after_tombstone");
  record({key}, MsgType::kUnwitness);
  RMASTORE_FAULT_POINT("delete.before_reclaim");
  reclaim(key, copies.empty() ? kNoVersion : tombstone);
}

void GlobalVariant::put(std::uint64_t key, const void *buf, std::size_t len) {
  const SlotId id{key, Ns::kValue};
  std::uint64_t version = 0;
  const Grants g = acquire_write(id, len, &version);
  write(g.copies, key, version + 1, len, make_flags(0, Ns::kValue), buf);
  // Only values whose put returned are promised, so the records come after the copies are
  // written and before the put returns. Written before the copies, a record of a put that died
  // on its way would make a key that was never stored read as lost.
  if (needs_record(id, g)) record({key});
}

void GlobalVariant::put_many(const std::vector<PutItem> &all) {
  for (std::size_t first = 0; first < all.size(); first += kBatchKeys) {
    const std::size_t n = std::min(kBatchKeys, all.size() - first);
    const PutItem *items = all.data() + first;
    std::vector<std::uint64_t> versions(n);
    std::vector<Grants> grants(n);
    std::vector<std::vector<HolderCache>> hcs(n);
    // Every missing grant in one round, as acquire_write asks for one key. The round that finds
    // none missing is the one whose grants are used (an install may make the cache forget
    // another key's).
    for (int attempt = 0;; ++attempt) {
      std::vector<Engine::Ask> asks;
      std::vector<std::size_t> of;
      for (std::size_t i = 0; i < n; ++i) {
        const SlotId id{items[i].key, Ns::kValue};
        hcs[i] = c_.cache.holders(id, &versions[i]);
        for (const HolderCache &hc : hcs[i]) {
          if (hc.can_write && hc.capacity >= items[i].len) continue;
          CtrlMsg m;
          m.type = MsgType::kAcquireWrite;
          m.length = items[i].len;
          asks.push_back(Engine::Ask{id, hc.holder, m});
          of.push_back(i);
        }
      }
      if (asks.empty()) break;
      if (attempt == 8) throw StoreError(STORE_ERR_INTERNAL, "write grant revoked repeatedly: concurrent writers?");
      const std::vector<CtrlMsg> replies = c_.engine.ask_all(c_.app, asks);
      for (std::size_t k = 0; k < replies.size(); ++k) {
        const CtrlMsg &r = replies[k];
        if (r.status == ReplyStatus::kNoMemory) throw StoreError(STORE_ERR_NO_MEMORY, "a holder is out of memory");
        if (r.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "holder refused a write grant");
        c_.cache.install(asks[k].id, asks[k].holder, r, true);
        grants[of[k]].asked = true;
        grants[of[k]].fresh = grants[of[k]].fresh || (r.flags & kReplyLive) == 0;
      }
    }
    std::vector<Engine::WriteJob> jobs(n);
    for (std::size_t i = 0; i < n; ++i) {
      const SlotId id{items[i].key, Ns::kValue};
      jobs[i].copies.assign(hcs[i].begin(), hcs[i].end());
      jobs[i].header = c_.engine.header(items[i].key, versions[i] + 1, items[i].len, make_flags(0, Ns::kValue));
      jobs[i].buf = items[i].buf;
      c_.cache.raise_version(id, versions[i] + 1);
    }
    c_.engine.write_many(c_.app, jobs, Engine::OnFailure::kThrow);
    std::vector<std::uint64_t> unrecorded;
    for (std::size_t i = 0; i < n; ++i) {
      const SlotId id{items[i].key, Ns::kValue};
      c_.cache.after_write(id, items[i].len, jobs[i].copies);
      if (needs_record(id, grants[i])) unrecorded.push_back(items[i].key);
    }
    record(unrecorded);
  }
}

void GlobalVariant::get_many(std::vector<GetItem> &items) {
  for (std::size_t first = 0; first < items.size(); first += kBatchKeys) {
    const std::size_t n = std::min(kBatchKeys, items.size() - first);
    std::vector<Engine::ReadJob> jobs;
    for (std::size_t i = first; i < first + n; ++i) {
      const SlotId id{items[i].key, Ns::kValue};
      jobs.push_back(Engine::ReadJob{id, c_.cache.read_order(id).front(), items[i].buf, items[i].capacity});
    }
    c_.engine.read_many(c_.app, jobs);
    for (std::size_t j = 0; j < n; ++j) {
      GetItem &it = items[first + j];
      const Engine::ReadJob &job = jobs[j];
      it.len = job.len;
      switch (job.result) {
      case ReadResult::kOk:
        it.status = STORE_OK;
        last_read_holder_ = job.holder;
        break;
      case ReadResult::kNotFound:
      case ReadResult::kDeleted:
        it.status = STORE_ERR_NOT_FOUND;
        break;
      case ReadResult::kLost:
        it.status = STORE_ERR_DATA_LOST;
        break;
      case ReadResult::kTruncated:
        it.status = STORE_ERR_TRUNCATED;
        break;
      default: // a put landed meanwhile, or the copy moved: as store_get does
        it.status = get(it.key, it.buf, it.capacity, &it.len);
      }
    }
  }
}

std::vector<std::uint64_t> GlobalVariant::list(std::uint64_t first, std::uint64_t last, std::size_t limit, bool *more) {
  std::vector<int> ranks(static_cast<std::size_t>(c_.rt.size));
  for (int r = 0; r < c_.rt.size; ++r) ranks[static_cast<std::size_t>(r)] = r;
  return c_.engine.list(c_.app, first, last, limit, ranks, more);
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
    case ReadResult::kDeleted:
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
  std::vector<std::uint64_t> unrecorded, deleted;
  items.reserve(values.size());
  for (const auto &[key, op] : values) {
    TxItem it{key, &op, 0, {}, {}};
    std::uint64_t current = 0, pending = 0;
    const SlotId id{key, Ns::kValue};
    const Grants g = acquire_write(id, op.bytes.size(), &current);
    if (op.del) {
      deleted.push_back(key);
    } else if (needs_record(id, g)) {
      unrecorded.push_back(key);
    }
    it.value_copies = g.copies;
    it.pending_copies = acquire_write(SlotId{key, Ns::kPending}, op.bytes.size(), &pending).copies;
    it.version = std::max(current, pending) + 1;
    items.push_back(std::move(it));
  }
  const std::vector<std::uint64_t> contents = decision_record(seq, values);
  const SlotId rid = record_slot(c_.id);
  std::uint64_t previous = 0;
  const std::vector<Copy> record_copies = acquire_write(rid, contents.size() * sizeof(std::uint64_t), &previous).copies;
  write_commit(seq, items, rid, record_copies, contents, c_.engine,
               [this](std::vector<Engine::WriteJob> &jobs, void (*between)()) {
                 // As write() does for one slot.
                 for (const Engine::WriteJob &j : jobs)
                   c_.cache.raise_version(SlotId{j.header.key, flags_ns(j.header.flags)}, j.header.version);
                 c_.engine.write_many(c_.app, jobs, Engine::OnFailure::kThrow, between);
                 for (const Engine::WriteJob &j : jobs)
                   c_.cache.after_write(SlotId{j.header.key, flags_ns(j.header.flags)}, j.header.length, j.copies);
               });
  record(unrecorded);
  record(deleted, MsgType::kUnwitness);
  for (const TxItem &it : items) {
    if (it.op->del) reclaim(it.key, it.version);
  }
}

void GlobalVariant::back_to_normal(bool tx_open) {
  // A reduction, not MPIX_Comm_agree: Open MPI 5.0.7's agreement sometimes returned success
  // with 0 when every process contributed 1 (4 of 150 runs of tests/test_failure --seed 1160,
  // on the third agreement after a shrink): with the helper thread in MPI, a deferred agreement
  // message lost its value (scripts/openmpi-patches/0010; stock releases still have it). If a
  // process fails meanwhile, some processes may have switched and others not; the failure sends
  // all of them through store_recover, which puts all in transaction mode again.
  int ok = tx_open ? 0 : 1, all = 0;
  check_collective(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c_.rt.comm), "MPI_Allreduce", "store_back_to_normal");
  if (!all) throw StoreError(STORE_ERR_TX_STATE, "a process has a transaction open");
  mode_ = STORE_MODE_NORMAL;
}

bool GlobalVariant::finalize_barrier() {
  // A process that dies while the others wait here is a process failure, like any other.
  check_collective(MPI_Barrier(c_.rt.comm), "MPI_Barrier", "store_finalize");
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
