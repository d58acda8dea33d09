// Localized variant, part 1: slot locks.
//
// Each copy's slot has a lock: the owner word of its header (slot.hpp), in window memory. Only
// the holder's threads change it, with atomic operations, on the lockers' behalf: the holder's
// helper thread serves kLock and kUnlock messages, and a process's own agents lock their local
// slots inline. MPI's atomics are not used: in Open MPI 5.0.x, MPI_Compare_and_swap and
// MPI_Fetch_and_op toward a dead process block forever, and every accumulate to a live process
// blocks forever once a process died holding that process's accumulate lock
// (docs/failures.md). A message to a helper is waited for with failure-aware polling, like every
// other wait in the store.
//
// Order: a locker takes the locks of its slots in one global order (namespace, then key, then
// placement order: a transaction's values before its decision record), so lockers never wait
// in a cycle. It first asks for all of them at once without
// queueing (kLockTry), which is all an uncontended put pays; when one is busy it gives back what
// it got and takes them one at a time, queueing at each holder. Placement changes when a process
// fails, and lockers that have not noticed yet see another order: so a wait gives up as soon as
// the failure count changes, and the locker releases everything and starts over.
//
// A lock whose owner failed stays taken until a repair (kLockRepair, repair.cpp) takes it over,
// brings the key's copies in line and releases it; lockers queued behind it get it after that.
// Taking it over moves the slot to fresh memory: a put the owner issued before it died may still
// land in the old block, which is retired and never reused.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include <time.h>

#include "clock.hpp"
#include "decide.hpp"
#include "errors.hpp"
#include "fault.hpp"
#include "repair.hpp"
#include "store.hpp"

namespace rmastore::internal {
void Store::quarantine_locked(const SlotId &id, SlotAllocator::Block &block, std::size_t need) {
  SlotAllocator::Block fresh = allocator_->allocate(std::max<std::size_t>(need, block.capacity), id.key, id.ns);
  SlotAllocator::copy_value(block, fresh);
  owner_of(fresh.base).store(owner_of(block.base).load());
  owner_of(block.base).store(kSlotRetired);
  quarantined_.push_back(block);
  block = fresh;
}

bool Store::owner_dead(std::uint64_t owner) const {
  if (owner == kOwnerFree || owner == kSlotRetired) return false;
  const int id = lock_word_id(owner);
  if (id < 0 || static_cast<std::size_t>(id) >= rank_of_id_.size()) return true;
  const int rank = rank_of_id_[static_cast<std::size_t>(id)];
  return rank < 0 || failures_->dead(rank);
}

void Store::grow_locked(const SlotId &id, HeldSlot &slot, std::size_t need) {
  RMASTORE_FAULT_POINT("enlarge.serve");
  SlotAllocator::Block bigger = allocator_->allocate(need, id.key, id.ns);
  SlotAllocator::copy_value(slot.block, bigger);
  owner_of(bigger.base).store(owner_of(slot.block.base).load());
  // Readers that cached the old address find it retired (or reused) and look again.
  allocator_->release(slot.block);
  slot.block = bigger;
  ++enlargements_served_;
}

CtrlMsg Store::grant_lock_locked(const SlotId &id, HeldSlot &slot, const CtrlMsg &msg) {
  if (slot.block.capacity < msg.length) grow_locked(id, slot, msg.length);
  HeldSlot *pending = nullptr;
  if (id.ns == Ns::kValue) {
    const SlotId pid{id.key, Ns::kPending};
    auto pit = table_.find(pid);
    if (pit == table_.end() && (msg.flags & kLockPending) != 0) {
      HeldSlot fresh;
      fresh.block =
          allocator_->allocate(std::max<std::size_t>(msg.length, config_.initial_slot_size), id.key, Ns::kPending);
      pit = table_.emplace(pid, std::move(fresh)).first;
    }
    if (pit != table_.end()) {
      pending = &pit->second;
      if ((msg.flags & kLockPending) != 0 && pending->block.capacity < msg.length)
        grow_locked(pid, *pending, msg.length);
    }
  }
  owner_of(slot.block.base).store(msg.owner, std::memory_order_release);
  SlotHeader h;
  CtrlMsg r = copy_reply(msg, slot.block, h);
  // Empty and lost copies are valid: their headers check.
  const CopyState state = classify_copy(h, slot.block.base, slot.block.capacity, id.key, id.ns);
  if (state != CopyState::kTorn) r.flags |= kReplyValid;
  if (state == CopyState::kLost) r.flags |= kReplyLost;
  if (pending != nullptr) {
    SlotHeader p = load_header(pending->block.base);
    r.flags |= kReplyHasPending;
    if (classify_copy(p, pending->block.base, pending->block.capacity, id.key, Ns::kPending) != CopyState::kTorn)
      r.flags |= kReplyPendingValid;
    r.pending_address = reinterpret_cast<std::uintptr_t>(pending->block.base);
    r.pending_capacity = pending->block.capacity;
    r.pending_version = p.version;
    r.pending_length = p.length;
    r.pending_tx = flags_tx(p.flags);
    r.pending_writer = p.writer;
    r.pending_half = (flag_bits(p.flags) & kFlagHalfB) != 0 ? 1 : 0;
  }
  return r;
}

// The owner died holding the lock: what it wrote is kept aside, and a repairer gets the lock.
CtrlMsg Store::break_lock_locked(const SlotId &id, HeldSlot &slot, const CtrlMsg &msg) {
  RMASTORE_FAULT_POINT("lock.break");
  quarantine_locked(id, slot.block, msg.length);
  if (id.ns == Ns::kValue) {
    // A committer writes the pending slot under this lock too.
    auto pit = table_.find(SlotId{id.key, Ns::kPending});
    if (pit != table_.end()) quarantine_locked(pit->first, pit->second.block, 0);
  }
  CtrlMsg r = grant_lock_locked(id, slot, msg);
  r.flags |= kReplyBroken;
  return r;
}

std::optional<CtrlMsg> Store::serve_lock(const CtrlMsg &msg, int source, bool inline_call) {
  std::lock_guard lk(table_mutex_);
  // A request from a process that failed since it sent it is dropped: nobody would release it.
  if (!inline_call && failures_->dead(source)) return std::nullopt;
  const SlotId id{msg.key, static_cast<Ns>(msg.ns)};
  auto it = table_.find(id);
  if (it == table_.end()) {
    const CtrlMsg refused = or_refusal(msg, [&] {
      HeldSlot fresh;
      fresh.block = allocator_->allocate(std::max<std::size_t>(msg.length, config_.initial_slot_size), id.key, id.ns);
      ++enlargements_served_;
      it = table_.emplace(id, std::move(fresh)).first;
      return reply_to(msg);
    });
    if (refused.status != ReplyStatus::kOk) return refused;
  }
  HeldSlot &slot = it->second;
  const std::uint64_t owner = owner_of(slot.block.base).load(std::memory_order_acquire);
  if (owner == kOwnerFree || owner == msg.owner)
    return or_refusal(msg, [&] { return grant_lock_locked(id, slot, msg); });
  if (owner_dead(owner) && (msg.flags & kLockRepair) != 0)
    return or_refusal(msg, [&] { return break_lock_locked(id, slot, msg); });
  if ((msg.flags & kLockTry) != 0) return reply_to(msg, ReplyStatus::kBusy);
  if (inline_call) return std::nullopt; // the agent asks its helper, which queues it
  RMASTORE_TRACE("queues rank %d at %llu/%u: owner %#llx, wanted by %#llx", source, (unsigned long long)id.key, msg.ns,
                 (unsigned long long)owner, (unsigned long long)msg.owner);
  slot.queued.push_back(Deferred{msg, source});
  return std::nullopt;
}

bool Store::serve_unlock(const CtrlMsg &msg, int, bool inline_call) {
  std::lock_guard lk(table_mutex_);
  const SlotId id{msg.key, static_cast<Ns>(msg.ns)};
  auto it = table_.find(id);
  if (it == table_.end()) return !inline_call;
  HeldSlot &slot = it->second;
  const bool held = owner_of(slot.block.base).load(std::memory_order_acquire) == msg.owner;
  // Inline, only a lock held with nobody waiting is released: a request of the agent to its own
  // helper may still be on its way, and only a message behind it is sure to withdraw it.
  if (inline_call && (!held || !slot.queued.empty())) return false;
  if (!held) {
    // Not (or no longer) its lock: withdraw the requests it has queued.
    std::erase_if(slot.queued, [&](const Deferred &d) { return d.msg.owner == msg.owner; });
    return true;
  }
  if ((msg.flags & kUnlockDropPending) != 0 && id.ns == Ns::kValue) {
    auto pit = table_.find(SlotId{id.key, Ns::kPending});
    if (pit != table_.end()) {
      allocator_->release(pit->second.block);
      table_.erase(pit);
    }
  }
  owner_of(slot.block.base).store(kOwnerFree, std::memory_order_release);
  if (!inline_call) grant_next_locked(id, slot);
  return true;
}

void Store::grant_next_locked(const SlotId &id, HeldSlot &slot) {
  while (!slot.queued.empty()) {
    const std::uint64_t owner = owner_of(slot.block.base).load(std::memory_order_acquire);
    const Deferred &next = slot.queued.front();
    if (owner != kOwnerFree && owner != next.msg.owner) return;
    const Deferred d = next;
    slot.queued.pop_front();
    if (failures_->dead(d.source)) continue;
    const CtrlMsg r = or_refusal(d.msg, [&] { return grant_lock_locked(id, slot, d.msg); });
    RMASTORE_TRACE("hands %llu/%u on to rank %d", (unsigned long long)id.key, d.msg.ns, d.source);
    helper_->send(d.source, d.msg.reply_tag, r);
  }
}

void Store::on_failures() {
  update_view();
  std::vector<SlotId> orphaned;
  {
    std::lock_guard lk(table_mutex_);
    for (auto &[id, slot] : table_) {
      std::erase_if(slot.queued, [&](const Deferred &d) { return failures_->dead(d.source); });
      if (!owner_dead(owner_of(slot.block.base).load(std::memory_order_acquire))) continue;
      // A repairer that queued here before this process knew the owner was dead gets the lock
      // now; it would otherwise wait for a release that never comes.
      auto waiting = std::find_if(slot.queued.begin(), slot.queued.end(),
                                  [](const Deferred &d) { return (d.msg.flags & kLockRepair) != 0; });
      if (waiting == slot.queued.end()) {
        orphaned.push_back(id);
        continue;
      }
      const Deferred d = *waiting;
      slot.queued.erase(waiting);
      const CtrlMsg r = or_refusal(d.msg, [&] { return break_lock_locked(id, slot, d.msg); });
      RMASTORE_TRACE("breaks %llu/%u for queued repairer rank %d", (unsigned long long)id.key,
                     static_cast<unsigned>(id.ns), d.source);
      helper_->send(d.source, d.msg.reply_tag, r);
    }
  }
  // Asked again after every failure: the coordinator asked before may be among the failed.
  for (const SlotId &id : orphaned) {
    const std::vector<int> hs = holders_of(id);
    const int coordinator = hs.empty() ? rank_ : hs.front();
    RMASTORE_TRACE("%llu/%u has a dead owner: repair asked of rank %d", (unsigned long long)id.key,
                   static_cast<unsigned>(id.ns), coordinator);
    if (coordinator == rank_) {
      if (repairer_) repairer_->request(id);
      continue;
    }
    CtrlMsg m;
    m.type = MsgType::kRepairNeeded;
    m.ns = static_cast<std::uint32_t>(id.ns);
    m.key = id.key;
    helper_->send(coordinator, kTagHelper, m);
  }
  if (repairer_) repairer_->view_changed();
}

CtrlMsg Store::lock_msg(std::uint64_t owner, std::size_t length, std::uint32_t flags) {
  CtrlMsg m;
  m.type = MsgType::kLock;
  m.length = length;
  m.owner = owner;
  m.flags = flags;
  return m;
}

std::uint64_t Store::newest_version(const Lock &l) {
  std::uint64_t v = kNoVersion;
  if ((l.grant.flags & kReplyValid) != 0) v = std::max(v, l.grant.version);
  if ((l.grant.flags & kReplyPendingValid) != 0) v = std::max(v, l.grant.pending_version);
  return v;
}

std::vector<Store::LockRequest> Store::lock_requests(const SlotId &id, std::size_t length, std::uint32_t flags) const {
  std::vector<LockRequest> reqs;
  for (int h : holders_of(id)) reqs.push_back(LockRequest{id, h, length, flags});
  return reqs;
}

Store::HolderCache Store::as_copy(const Lock &l) {
  HolderCache hc;
  hc.holder = l.req.holder;
  hc.address = l.grant.address;
  hc.capacity = l.grant.capacity;
  hc.half_b = l.grant.half != 0;
  return hc;
}

Store::HolderCache Store::as_pending_copy(const Lock &l) {
  HolderCache hc;
  hc.holder = l.req.holder;
  hc.address = l.grant.pending_address;
  hc.capacity = l.grant.pending_capacity;
  hc.half_b = l.grant.pending_half != 0;
  return hc;
}

void Store::send_unlock(Agent &a, const LockRequest &req, std::uint64_t owner, std::uint32_t flags) {
  if (failures_->dead(req.holder)) return;
  CtrlMsg m;
  m.type = MsgType::kUnlock;
  m.ns = static_cast<std::uint32_t>(req.id.ns);
  m.key = req.id.key;
  m.owner = owner;
  m.flags = flags;
  if (req.holder == rank_ && serve_unlock(m, rank_, true)) return;
  a.post(req.holder, m); // through our helper when others wait: it hands the lock on
}

void Store::release_locks(Agent &a, const std::vector<Lock> &locks, std::uint32_t flags) {
  for (const Lock &l : locks) send_unlock(a, l.req, l.owner, flags);
}

std::vector<Store::Lock> Store::acquire_locks(Agent &a, const std::vector<LockRequest> &reqs) {
  struct ViewGuard {
    Agent &a;
    ~ViewGuard() { a.lock_view = -1; }
  } guard{a};
  a.lock_view = failures_->failures();
  // One word for the whole acquisition, kept with each lock: a lock is released with the word
  // it was taken with, whatever the epoch is by then.
  const std::uint64_t owner = a.lock_word();
  const auto ask = [&](const LockRequest &r, std::uint32_t extra) {
    return lock_msg(owner, r.length, r.flags | extra);
  };
  std::vector<Lock> held;
  std::vector<const LockRequest *> asked; // granted or queued somewhere: all get an unlock on failure
  const auto take = [&](const LockRequest &r, const CtrlMsg &reply) {
    if (reply.status == ReplyStatus::kNoMemory) throw StoreError(STORE_ERR_NO_MEMORY, "a holder is out of memory");
    if (reply.status != ReplyStatus::kOk) throw StoreError(STORE_ERR_INTERNAL, "a holder refused a lock");
    held.push_back(Lock{r, reply, owner});
  };
  try {
    // Uncontended: all at once.
    std::vector<Ask> asks;
    for (const LockRequest &r : reqs) {
      asks.push_back(Ask{r.id, r.holder, ask(r, kLockTry)});
      asked.push_back(&r);
    }
    const std::vector<CtrlMsg> replies = ask_all(a, asks);
    bool busy = false;
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      if (replies[i].status == ReplyStatus::kBusy) {
        busy = true;
      } else {
        take(reqs[i], replies[i]);
      }
    }
    if (!busy) {
      RMASTORE_FAULT_POINT("lock.acquired");
      return held;
    }
    release_locks(a, held);
    held.clear();
    asked.clear();
    // Contended: one at a time, in order, queueing. The repair thread queues only when it has
    // nothing else to repair (Repairer::enter_queue); otherwise it comes back to this slot later.
    Repairer *const repairer = a.kind == 1 ? repairer_.get() : nullptr;
    if (repairer != nullptr && !repairer->enter_queue()) throw LocksBusy();
    struct QueueGuard {
      Repairer *r;
      ~QueueGuard() {
        if (r != nullptr) r->leave_queue();
      }
    } queue_guard{repairer};
    try {
      for (const LockRequest &r : reqs) {
        asked.push_back(&r);
        take(r, ask_all(a, {Ask{r.id, r.holder, ask(r, 0)}}).front());
        RMASTORE_FAULT_POINT("lock.acquired");
      }
    } catch (const StoreError &) {
      if (repairer != nullptr && repairer->interrupted()) throw LocksBusy();
      throw;
    }
    return held;
  } catch (const std::exception &e) {
    RMASTORE_TRACE("agent %d gives up its locks of %llu/%u: %s", a.kind, (unsigned long long)reqs.front().id.key,
                   static_cast<unsigned>(reqs.front().id.ns), e.what());
    for (const LockRequest *r : asked) send_unlock(a, *r, owner);
    throw;
  }
}

bool Store::Retry::after(const StoreError &e) {
  if (e.status() != STORE_ERR_PROC_FAILED || s_.failures_->revoked()) return false;
  record_failures(s_.ctrl_, *s_.failures_);
  s_.update_view();
  const int now = s_.failures_->failures();
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

void Store::put_localized(std::uint64_t key, const void *buf, std::size_t len) {
  const SlotId id{key, Ns::kValue};
  // Each new attempt follows a failure that changed placement or hit a holder.
  Retry retry(*this);
  for (;;) {
    app_->flush();
    update_view();
    std::vector<Lock> locks;
    try {
      locks = acquire_locks(*app_, lock_requests(id, len, 0));
    } catch (const StoreError &e) {
      if (retry.after(e)) continue;
      throw;
    }
    std::uint64_t version = kNoVersion;
    std::vector<HolderCache> copies;
    for (const Lock &l : locks) {
      version = std::max(version, newest_version(l));
      copies.push_back(as_copy(l));
    }
    SlotHeader h{};
    h.key = key;
    h.version = version + 1;
    h.length = len;
    h.flags = make_flags(0, Ns::kValue);
    try {
      write_copies(*app_, copies, h, buf, true);
    } catch (const StoreError &e) {
      release_locks(*app_, locks);
      // Every copy's holder failed during the put: the key's new holders get it.
      if (retry.after(e)) continue;
      throw;
    }
    release_locks(*app_, locks);
    return;
  }
}

} // namespace rmastore::internal
