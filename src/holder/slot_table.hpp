// The holder side: the slots this process keeps copies in, and the serving of every request
// about them. One mutex guards the table, its allocator and the quarantine; the helper thread
// serves other processes' requests and this process's agents ask inline.
//
// What it serves:
//   grants  (global variant) - kAcquireWrite gives one writer per slot a write grant, which the
//            writer caches; a slot that must grow moves, and the cached readers and writer of
//            the old block are invalidated first (kInvalidate / kInvalidateAck).
//   lookups - kLookup: where a copy is, for readers.
//   locks   (localized variant) - kLock / kUnlock: the slot's owner word (slot.hpp), set on the
//            locker's behalf (locks.hpp has the protocol). A lock whose owner failed is broken
//            only for a repairer.
// A slot that a failed process may still write into (a put it issued before it died may land
// late) is quarantined: moved to fresh memory and never given out again.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/config.hpp"
#include "common/decide.hpp"
#include "common/slot.hpp"
#include "transport/membership.hpp"
#include "transport/runtime.hpp"

namespace rmastore::internal {

// What reading one copy found.
// kNotFound: no copy here (no slot, or one never written); kDeleted: a tombstone, the key was
// deleted (not found, and no other holder need be asked).
enum class ReadResult { kOk, kNotFound, kDeleted, kLost, kTruncated, kRetry, kStale };

// A kReply to `msg` that describes the copy in `block`: where it is and what its header (read
// into `h`) says.
CtrlMsg copy_reply(const CtrlMsg &msg, const SlotAllocator::Block &block, SlotHeader &h);

class SlotTable {
public:
  // Replies go out through rt's helper; writers and lock owners are named by membership's ids.
  SlotTable(const Config &config, Runtime &rt, Membership &membership);
  SlotTable(const SlotTable &) = delete;
  SlotTable &operator=(const SlotTable &) = delete;

  // ---- serving (helper thread) ----
  // kAcquireWrite, kLookup: the reply, or nullopt when it follows later (acks awaited).
  std::optional<CtrlMsg> serve(const CtrlMsg &msg, int source);
  void on_invalidate_ack(const CtrlMsg &msg);
  // kLock: the grant, or nullopt when the request is queued (or dropped: its sender failed).
  std::optional<CtrlMsg> serve_lock(const CtrlMsg &msg, int source);
  // kUnlock; with kUnlockReclaim the slots go, unless a locker waits.
  void serve_unlock(const CtrlMsg &msg);
  // kReclaim from `source` (global variant): frees the key's slots if they still hold the
  // tombstone it names and no other writer has taken them.
  void serve_reclaim(const CtrlMsg &msg, int source);
  // After new failures: drops their queued lock requests, hands locks they held to repairers
  // that queued for them, and returns the slots whose lock a failed process still holds.
  std::vector<SlotId> after_failures();

  // ---- this process's own agents ----
  // kAcquireWrite, kLookup or kLock for a slot here, answered without the helper; nullopt if the
  // answer needs other processes or a queue (the agent then asks its helper).
  std::optional<CtrlMsg> serve_inline(const CtrlMsg &msg, int self);
  // Releases a lock nobody waits for; false otherwise (the agent then sends the unlock to its
  // helper, behind any lock request of its own still on the way).
  bool unlock_inline(const CtrlMsg &msg);
  // Reads our own copy of `id`, without any lock: see the protocols of slot.hpp.
  ReadResult read_local(const SlotId &id, void *buf, std::size_t capacity, std::size_t *len) const;
  // The length of our complete copy of `id`, 0 if none.
  std::size_t local_length(const SlotId &id) const;
  // Every slot here but pending ones.
  std::vector<SlotId> slots() const;
  // The keys in [first, last] whose value copy here is complete or a lost marker, ascending, at
  // most `limit` of them (store_list).
  std::vector<std::uint64_t> keys_in(std::uint64_t first, std::uint64_t last, std::size_t limit) const;
  // Slots here whose lock a failed process holds.
  std::uint64_t dead_owned() const;

  // ---- store_recover (no other thread of the store runs) ----
  // Forgets every grant and lock; quarantines what a failed process could still write into.
  void reset_grants();
  struct LocalCopy {
    SlotId id;
    SlotHeader header;
    CopyState state;
  };
  std::vector<LocalCopy> copies() const;
  void mark_lost(const SlotId &id);
  // Our copy of (key, from) as the destination's copy of `to`, which gets it in its first half:
  // the header to install there and where the value lies here. nullopt if we have no such slot.
  struct Outgoing {
    SlotHeader header;
    std::byte *value;
  };
  std::optional<Outgoing> outgoing(std::uint64_t key, Ns from, Ns to) const;
  // A slot for `id` of at least `length` bytes, its contents to be overwritten: its base.
  std::byte *make_room(const SlotId &id, std::size_t length);
  void drop(const SlotId &id);

  // ---- lifecycle and introspection ----
  const std::vector<SlotAllocator::Region> &regions() const { return allocator_->regions(); }
  // Counts value copies from the allocator's directory, without the table's lock.
  void count(store_info_t &out) const;
  std::uint64_t enlargements_served() const { return enlargements_served_.load(); }
  // For tests: our copy of a value, straight from memory.
  bool read_local_copy(std::uint64_t key, SlotHeader &header, std::vector<std::byte> &value) const;
  // Empties the table; its memory goes with the window (finalize).
  void clear();
  // Leaves the memory to MPI_Finalize: the window it is attached to was not freed.
  void abandon();

private:
  struct Deferred {
    CtrlMsg msg;
    int source;
  };
  // One per slot held here, so kept small: what only a contended slot needs takes no memory
  // until then (a std::deque allocated 576 bytes as soon as it was made, an optional reply held
  // a whole message inline).
  struct HeldSlot {
    SlotAllocator::Block block;
    int writer = -1;    // global: current rank of the write grant's holder
    int writer_id = -1; // its stable id: recovery must know whether it failed
    std::vector<int> readers;
    // A grant that waits for invalidation acks: its reply, the old block to free, and requests
    // for the same slot that arrived meanwhile.
    int pending_acks = 0;
    std::unique_ptr<Deferred> stashed_reply;
    SlotAllocator::Block retired;
    std::vector<Deferred> queued; // in arrival order. Global: requests waiting for acks; localized: lock waiters
  };
  using Table = std::unordered_map<SlotId, HeldSlot, SlotIdHash>;

  // The slot `msg` is about, made if a writer or locker asks for a new one. nullptr with the
  // reply in *refused: not found (a lookup), or no memory.
  HeldSlot *find_or_create_locked(const SlotId &id, const CtrlMsg &msg, CtrlMsg *refused);
  std::optional<CtrlMsg> serve_locked(const CtrlMsg &msg, int source, bool inline_call);
  std::optional<CtrlMsg> grant_or_defer_locked(HeldSlot &slot, const CtrlMsg &msg, int source);
  CtrlMsg grant_locked(HeldSlot &slot, const CtrlMsg &msg, int source, std::vector<int> &invalidate);
  void dispatch_queued_locked(HeldSlot &slot);
  std::optional<CtrlMsg> serve_lock_locked(const CtrlMsg &msg, int source, bool inline_call);
  CtrlMsg grant_lock_locked(const SlotId &id, HeldSlot &slot, const CtrlMsg &msg);
  CtrlMsg break_lock_locked(const SlotId &id, HeldSlot &slot, const CtrlMsg &msg);
  void grant_next_locked(const SlotId &id, HeldSlot &slot);
  // Frees the lock of `slot`, and with kUnlockDropPending the key's pending slot.
  void release_locked(const SlotId &id, HeldSlot &slot, std::uint32_t flags);
  // Frees value slot `id` and the key's pending slot, and forgets them.
  void reclaim_locked(const SlotId &id);
  // Moves `slot` to a block of at least `need` bytes, keeping its value and lock word; the old
  // block is released. Throws std::bad_alloc or StoreError when memory runs out.
  void grow_locked(const SlotId &id, HeldSlot &slot, std::size_t need);
  // A failed process may still have a put in flight into `block`: the block is retired (marked,
  // and kept out of the allocator for good); the slot continues in a fresh block of at least
  // `need` bytes, with the same contents and lock word.
  void quarantine_locked(const SlotId &id, SlotAllocator::Block &block, std::size_t need);
  // Whether the process a lock word names is gone. Loops take `view` once, not per slot.
  bool owner_dead(std::uint64_t owner, const View &view) const;
  void send(int dest, int tag, const CtrlMsg &m) { rt_.helper->send(dest, tag, m); }

  const Config &config_;
  Runtime &rt_;
  Membership &membership_;
  mutable std::mutex mu_;
  std::unique_ptr<SlotAllocator> allocator_;
  Table table_;
  std::atomic<std::uint64_t> enlargements_served_{0};
  // Grant numbers, rising across all slots here: a slot freed and made again for the same key
  // must not hand out numbers that a cacher's invalidation floor still covers (KeyCache).
  std::uint64_t grant_clock_ = 0;
  // Slots a failed process could still write into (its data may be in flight): never reused.
  std::vector<SlotAllocator::Block> quarantined_;
};

} // namespace rmastore::internal
