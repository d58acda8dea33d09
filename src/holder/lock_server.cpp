#include "holder/lock_server.hpp"

#include <algorithm>

#include "common/errors.hpp"
#include "common/fault.hpp"

namespace rmastore::internal {

int cacher_of(std::uint64_t owner, const View &view, const Runtime &rt) {
  if (owner == kOwnerFree || owner == kSlotRetired || !lock_word_cacheable(owner)) return -1;
  const auto at = static_cast<std::size_t>(lock_word_id(owner));
  const int rank = at < view.rank_of_id.size() ? view.rank_of_id[at] : -1;
  if (rank < 0 || rank == rt.rank || rt.failures->dead(rank)) return -1;
  return rank;
}

CtrlMsg revoke_msg(const SlotId &id, std::uint64_t owner) {
  CtrlMsg m;
  m.type = MsgType::kRevoke;
  m.ns = static_cast<std::uint32_t>(id.ns);
  m.key = id.key;
  m.owner = owner;
  return m;
}

bool LockServer::owner_dead(std::uint64_t owner, const View &view) const {
  if (owner == kOwnerFree || owner == kSlotRetired) return false;
  return view.id_gone(lock_word_id(owner), *rt_.failures);
}

bool LockServer::has_waiters_locked(const SlotId &id) const {
  return waiters_.count(id) > 0;
}

CtrlMsg LockServer::grant_locked(const SlotId &id, Block &block, const CtrlMsg &msg) {
  if (block.capacity < msg.length) slots_.grow_locked(id, block, msg.length);
  Block *pending = nullptr;
  if (id.ns == Ns::kValue) {
    const SlotId pid{id.key, Ns::kPending};
    pending = slots_.find_locked(pid);
    if (pending == nullptr && (msg.flags & kLockPending) != 0) pending = slots_.create_locked(pid, msg.length);
    if (pending != nullptr && (msg.flags & kLockPending) != 0 && pending->capacity < msg.length)
      slots_.grow_locked(pid, *pending, msg.length);
  }
  owner_of(block.base).store(msg.owner, std::memory_order_release);
  SlotHeader h;
  CtrlMsg r = copy_reply(msg, block, h);
  // Empty and lost copies are valid: their headers check.
  const CopyState state = classify_copy(h, block.base, block.capacity, id.key, id.ns);
  if (state != CopyState::kTorn) r.flags |= kReplyValid;
  if (state == CopyState::kLost) r.flags |= kReplyLost;
  if (state == CopyState::kComplete) r.flags |= kReplyLive;
  if (state == CopyState::kDeleted) r.flags |= kReplyDeleted;
  if (pending != nullptr) {
    SlotHeader p = load_header(pending->base);
    r.flags |= kReplyHasPending;
    const CopyState ps = classify_copy(p, pending->base, pending->capacity, id.key, Ns::kPending);
    if (ps != CopyState::kTorn) r.flags |= kReplyPendingValid;
    if (ps == CopyState::kDeleted) r.flags |= kReplyPendingDeleted;
    r.pending_address = reinterpret_cast<std::uintptr_t>(pending->base);
    r.pending_capacity = pending->capacity;
    r.pending_version = p.version;
    r.pending_length = p.length;
    r.pending_tx = flags_tx(p.flags);
    r.pending_writer = p.writer;
    r.pending_half = (flag_bits(p.flags) & kFlagHalfB) != 0 ? 1 : 0;
  }
  return r;
}

// The owner died holding the lock: what it wrote is kept aside, and a repairer gets the lock.
CtrlMsg LockServer::break_locked(const SlotId &id, Block &block, const CtrlMsg &msg) {
  RMASTORE_FAULT_POINT("lock.break");
  slots_.quarantine_locked(id, block, msg.length);
  if (id.ns == Ns::kValue) {
    // A committer writes the pending slot under this lock too.
    const SlotId pid{id.key, Ns::kPending};
    if (Block *pending = slots_.find_locked(pid)) slots_.quarantine_locked(pid, *pending, 0);
  }
  CtrlMsg r = grant_locked(id, block, msg);
  r.flags |= kReplyBroken;
  return r;
}

std::optional<CtrlMsg> LockServer::serve(const CtrlMsg &msg, int source) {
  std::lock_guard lk(slots_.mutex());
  return serve_locked(msg, source, false);
}

std::optional<CtrlMsg> LockServer::serve_inline(const CtrlMsg &msg, int self) {
  std::lock_guard lk(slots_.mutex());
  return serve_locked(msg, self, true);
}

std::optional<CtrlMsg> LockServer::serve_locked(const CtrlMsg &msg, int source, bool inline_call) {
  // A request from a process that failed since it sent it is dropped: nobody would release it.
  if (!inline_call && rt_.failures->dead(source)) return std::nullopt;
  const SlotId id = slot_of(msg);
  CtrlMsg refused;
  Block *block = slots_.find_or_create_locked(id, msg, &refused);
  if (block == nullptr) return refused;
  const std::uint64_t owner = owner_of(block->base).load(std::memory_order_acquire);
  if (owner == kOwnerFree || owner == msg.owner) return or_refusal(msg, [&] { return grant_locked(id, *block, msg); });
  // Only a repairer's request asks whether the owner died: a busy lock costs a put no view.
  if ((msg.flags & kLockRepair) != 0 && owner_dead(owner, *membership_.view()))
    return or_refusal(msg, [&] { return break_locked(id, *block, msg); });
  // Only the helper thread sends; an inline requester asks the owner itself (the busy reply names
  // it), and one that must wait comes back through the helper.
  if (!inline_call) ask_back_locked(id, owner);
  if ((msg.flags & kLockTry) != 0) {
    CtrlMsg busy = reply_to(msg, ReplyStatus::kBusy);
    busy.owner = owner;
    return busy;
  }
  if (inline_call) return std::nullopt; // the agent asks its helper, which queues it
  RMASTORE_TRACE("queues rank %d at %llu/%u: owner %#llx, wanted by %#llx", source, (unsigned long long)id.key, msg.ns,
                 (unsigned long long)owner, (unsigned long long)msg.owner);
  waiters_[id].push_back(Deferred{msg, source});
  return std::nullopt;
}

// The owner may keep the lock cached after its put (locks.hpp): ask for it back. An owner that
// is using it releases it when done, one that has released it already ignores this.
void LockServer::ask_back_locked(const SlotId &id, std::uint64_t owner) {
  const int rank = cacher_of(owner, *membership_.view(), rt_);
  if (rank >= 0) rt_.helper->send(rank, kTagHelper, revoke_msg(id, owner));
}

void LockServer::release_locked(const SlotId &id, Block &block, std::uint32_t flags) {
  if ((flags & kUnlockDropPending) != 0 && id.ns == Ns::kValue) {
    const SlotId pid{id.key, Ns::kPending};
    slots_.erase_locked(pid);
    waiters_.erase(pid);
  }
  owner_of(block.base).store(kOwnerFree, std::memory_order_release);
}

void LockServer::serve_unlock(const CtrlMsg &msg) {
  std::lock_guard lk(slots_.mutex());
  const SlotId id = slot_of(msg);
  Block *block = slots_.find_locked(id);
  if (block == nullptr) return;
  if (owner_of(block->base).load(std::memory_order_acquire) != msg.owner) {
    // Not (or no longer) its lock: withdraw the requests it has queued.
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    std::erase_if(it->second, [&](const Deferred &d) { return d.msg.owner == msg.owner; });
    if (it->second.empty()) waiters_.erase(it);
    return;
  }
  if ((msg.flags & kUnlockReclaim) != 0 && !has_waiters_locked(id)) {
    reclaim_locked(id);
    return;
  }
  release_locked(id, *block, msg.flags);
  grant_next_locked(id, *block);
}

// A deleted key's slots go back to the allocator (a waiting locker would have been handed the
// tombstone instead). Readers that cached their address find them retired or reused.
void LockServer::reclaim_locked(const SlotId &id) {
  for (const SlotId &s : {SlotId{id.key, Ns::kPending}, id}) {
    slots_.erase_locked(s);
    waiters_.erase(s);
  }
}

bool LockServer::unlock_inline(const CtrlMsg &msg) {
  std::lock_guard lk(slots_.mutex());
  const SlotId id = slot_of(msg);
  Block *block = slots_.find_locked(id);
  if (block == nullptr) return false;
  // Only a lock held with nobody waiting: a request of the agent to its own helper may still be
  // on its way, and only a message behind it is sure to withdraw it.
  if (owner_of(block->base).load(std::memory_order_acquire) != msg.owner || has_waiters_locked(id)) return false;
  if ((msg.flags & kUnlockReclaim) != 0) {
    reclaim_locked(id);
  } else {
    release_locked(id, *block, msg.flags);
  }
  return true;
}

void LockServer::grant_next_locked(const SlotId &id, Block &block) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  std::vector<Deferred> &queue = it->second;
  while (!queue.empty()) {
    const std::uint64_t owner = owner_of(block.base).load(std::memory_order_acquire);
    const Deferred &next = queue.front();
    if (owner != kOwnerFree && owner != next.msg.owner) {
      // Others still wait: the new owner must not keep the lock cached (the revokes they caused
      // went to the previous owner).
      ask_back_locked(id, owner);
      return;
    }
    const Deferred d = next;
    queue.erase(queue.begin());
    if (rt_.failures->dead(d.source)) continue;
    const CtrlMsg r = or_refusal(d.msg, [&] { return grant_locked(id, block, d.msg); });
    RMASTORE_TRACE("hands %llu/%u on to rank %d", (unsigned long long)id.key, d.msg.ns, d.source);
    rt_.helper->send(d.source, d.msg.reply_tag, r);
  }
  waiters_.erase(it);
}

std::vector<SlotId> LockServer::after_failures() {
  std::vector<SlotId> orphaned;
  const std::shared_ptr<const View> view = membership_.view();
  std::lock_guard lk(slots_.mutex());
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    std::erase_if(it->second, [&](const Deferred &d) { return rt_.failures->dead(d.source); });
    it = it->second.empty() ? waiters_.erase(it) : std::next(it);
  }
  // Collected first: breaking a lock may make the key's pending slot, which must not happen
  // while the slots are walked.
  std::vector<SlotId> dead;
  slots_.for_each_locked([&](const SlotId &id, const Block &block) {
    if (owner_dead(owner_of(block.base).load(std::memory_order_acquire), *view)) dead.push_back(id);
  });
  for (const SlotId &id : dead) {
    // A repairer that queued here before this process knew the owner was dead gets the lock
    // now; it would otherwise wait for a release that never comes.
    auto queue = waiters_.find(id);
    auto waiting = queue == waiters_.end()
                       ? std::vector<Deferred>::iterator{}
                       : std::find_if(queue->second.begin(), queue->second.end(),
                                      [](const Deferred &d) { return (d.msg.flags & kLockRepair) != 0; });
    if (queue == waiters_.end() || waiting == queue->second.end()) {
      orphaned.push_back(id);
      continue;
    }
    const Deferred d = *waiting;
    queue->second.erase(waiting);
    if (queue->second.empty()) waiters_.erase(queue);
    Block *block = slots_.find_locked(id);
    const CtrlMsg r = or_refusal(d.msg, [&] { return break_locked(id, *block, d.msg); });
    RMASTORE_TRACE("breaks %llu/%u for queued repairer rank %d", (unsigned long long)id.key,
                   static_cast<unsigned>(id.ns), d.source);
    rt_.helper->send(d.source, d.msg.reply_tag, r);
  }
  return orphaned;
}

std::uint64_t LockServer::dead_owned() const {
  std::uint64_t n = 0;
  const std::shared_ptr<const View> view = membership_.view();
  std::lock_guard lk(slots_.mutex());
  slots_.for_each_locked([&](const SlotId &, const Block &block) {
    if (owner_dead(owner_of(block.base).load(), *view)) ++n;
  });
  return n;
}

void LockServer::reset() {
  std::lock_guard lk(slots_.mutex());
  const std::shared_ptr<const View> view = membership_.view(); // leaves the failed processes out
  const auto failed_owner = [&](const SlotId &id) {
    const Block *block = slots_.find_locked(id);
    return block != nullptr && owner_dead(owner_of(block->base).load(), *view);
  };
  std::vector<SlotId> unsafe;
  slots_.for_each_locked([&](const SlotId &id, const Block &) {
    if (failed_owner(id) || (id.ns == Ns::kPending && failed_owner(SlotId{id.key, Ns::kValue}))) unsafe.push_back(id);
  });
  for (const SlotId &id : unsafe) slots_.quarantine_locked(id, *slots_.find_locked(id), 0);
  slots_.for_each_locked([](const SlotId &, Block &block) { owner_of(block.base).store(kOwnerFree); });
  waiters_.clear();
}

} // namespace rmastore::internal
