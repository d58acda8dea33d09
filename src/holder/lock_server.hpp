// The holder side of the localized variant: the locks of the slots here.
//
// kLock / kUnlock set the slot's owner word (slot.hpp) on the locker's behalf; the protocol is
// in variants/localized/locks.hpp. A lock whose owner failed is broken only for a repairer: what
// the owner may still write lands in a quarantined block. Requests for a busy lock wait here in
// arrival order; only contended slots take memory for that. Under the SlotStore's mutex.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "holder/slot_store.hpp"
#include "transport/membership.hpp"
#include "transport/runtime.hpp"

namespace rmastore::internal {

// The current rank of the process that may hold a lock with word `owner` cached, if it is alive
// and another process than this one (whose own slots it never caches); -1 otherwise.
int cacher_of(std::uint64_t owner, const View &view, const Runtime &rt);
// A kRevoke of the lock `owner` holds on slot `id`.
CtrlMsg revoke_msg(const SlotId &id, std::uint64_t owner);

class LockServer {
public:
  // Grants go out through rt's helper; lock owners are named by membership's ids.
  LockServer(SlotStore &slots, Runtime &rt, Membership &membership) : slots_(slots), rt_(rt), membership_(membership) {}
  LockServer(const LockServer &) = delete;
  LockServer &operator=(const LockServer &) = delete;

  // kLock (helper thread): the grant, or nullopt when the request is queued (or dropped: its
  // sender failed).
  std::optional<CtrlMsg> serve(const CtrlMsg &msg, int source);
  // kLock of this process's own agent, answered without the helper; nullopt if it must wait (the
  // agent then asks its helper, which queues it).
  std::optional<CtrlMsg> serve_inline(const CtrlMsg &msg, int self);
  // kUnlock; with kUnlockReclaim the slots go, unless a locker waits.
  void serve_unlock(const CtrlMsg &msg);
  // Releases a lock nobody waits for; false otherwise (the agent then sends the unlock to its
  // helper, behind any lock request of its own still on the way).
  bool unlock_inline(const CtrlMsg &msg);
  // After new failures: drops their queued lock requests, hands locks they held to repairers
  // that queued for them, and returns the slots whose lock a failed process still holds.
  std::vector<SlotId> after_failures();
  // Slots here whose lock a failed process holds.
  std::uint64_t dead_owned() const;
  // store_recover, no other thread running: frees every lock and forgets every waiter. A slot
  // whose lock a failed process held (or that of its key's value slot: a committer writes the
  // pending slot under it) is quarantined.
  void reset();

private:
  using Block = SlotAllocator::Block;

  std::optional<CtrlMsg> serve_locked(const CtrlMsg &msg, int source, bool inline_call);
  CtrlMsg grant_locked(const SlotId &id, Block &block, const CtrlMsg &msg);
  CtrlMsg break_locked(const SlotId &id, Block &block, const CtrlMsg &msg);
  void grant_next_locked(const SlotId &id, Block &block);
  // Frees the lock of `block`, and with kUnlockDropPending the key's pending slot.
  void release_locked(const SlotId &id, Block &block, std::uint32_t flags);
  // Frees value slot `id` and the key's pending slot, and forgets them.
  void reclaim_locked(const SlotId &id);
  bool has_waiters_locked(const SlotId &id) const;
  // Sends kRevoke to the process whose lock word `owner` is, if it may hold the lock cached.
  void ask_back_locked(const SlotId &id, std::uint64_t owner);
  // Whether the process a lock word names is gone. Loops take `view` once, not per slot.
  bool owner_dead(std::uint64_t owner, const View &view) const;

  SlotStore &slots_;
  Runtime &rt_;
  Membership &membership_;
  std::unordered_map<SlotId, std::vector<Deferred>, SlotIdHash> waiters_; // never an empty vector
};

} // namespace rmastore::internal
