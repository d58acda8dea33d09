// The holder side of the global variant: write grants and lookups for the slots here.
//
// kAcquireWrite gives one writer per slot a write grant, which the writer caches; kLookup tells
// a reader where a copy is, and remembers it as a cached reader. A slot that must grow moves,
// and the cached readers and writer of the old block are invalidated first (kInvalidate /
// kInvalidateAck): the grant is answered when every ack is in. kReclaim frees a deleted key's
// slots. The state of each slot is kept under the SlotStore's mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "holder/slot_store.hpp"
#include "transport/membership.hpp"
#include "transport/runtime.hpp"

namespace rmastore::internal {

class GrantServer {
public:
  // Replies and invalidations go out through rt's helper; writers are named by membership's ids.
  GrantServer(SlotStore &slots, Runtime &rt, Membership &membership)
      : slots_(slots), rt_(rt), membership_(membership) {}
  GrantServer(const GrantServer &) = delete;
  GrantServer &operator=(const GrantServer &) = delete;

  // kAcquireWrite, kLookup (helper thread): the reply, or nullopt when it follows later (acks
  // awaited). kAcquireWrite makes the key's slot in the window's memory if there is none, or
  // moves it if it is smaller than the length asked, and makes the sender the slot's writer,
  // revoking the previous writer's grant first. The reply carries the slot's address, capacity
  // and version, with kReplyLive if it holds a complete value.
  std::optional<CtrlMsg> serve(const CtrlMsg &msg, int source);
  // The same for this process's own agent, answered without the helper; nullopt if the answer
  // needs other processes (the agent then asks its helper).
  std::optional<CtrlMsg> serve_inline(const CtrlMsg &msg, int self);
  void on_invalidate_ack(const CtrlMsg &msg);
  // kReclaim from `source`: frees the key's slots if they still hold the tombstone it names and
  // no other writer has taken them.
  void serve_reclaim(const CtrlMsg &msg, int source);
  // store_recover, no other thread running: forgets every grant; a slot whose writer failed is
  // quarantined, and so is an old block that cached readers could still hold.
  void reset();

private:
  // One per slot served here.
  struct Grant {
    int writer = -1;    // current rank of the write grant's holder
    int writer_id = -1; // its stable id: recovery must know whether it failed
    std::vector<int> readers;
    // A grant that waits for invalidation acks: its reply, the old block to free, and requests
    // for the same slot that arrived meanwhile, in arrival order.
    int pending_acks = 0;
    std::unique_ptr<Deferred> stashed_reply;
    SlotAllocator::Block retired;
    std::vector<Deferred> queued;
  };

  std::optional<CtrlMsg> serve_locked(const CtrlMsg &msg, int source, bool inline_call);
  std::optional<CtrlMsg> grant_or_defer_locked(const SlotId &id, SlotAllocator::Block &block, Grant &g,
                                               const CtrlMsg &msg, int source);
  CtrlMsg grant_locked(const SlotId &id, SlotAllocator::Block &block, Grant &g, const CtrlMsg &msg, int source,
                       std::vector<int> &invalidate);
  void dispatch_queued_locked(const SlotId &id, SlotAllocator::Block &block, Grant &g);
  void send(int dest, int tag, const CtrlMsg &m) { rt_.helper->send(dest, tag, m); }

  SlotStore &slots_;
  Runtime &rt_;
  Membership &membership_;
  std::unordered_map<SlotId, Grant, SlotIdHash> grants_;
  // Grant numbers, rising across all slots here: a slot freed and made again for the same key
  // must not hand out numbers that a cacher's invalidation floor still covers (KeyCache).
  std::uint64_t grant_clock_ = 0;
};

} // namespace rmastore::internal
