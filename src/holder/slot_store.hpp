// The slots this process keeps copies in: their memory, the quarantine, and reading our own
// copies. The protocols that hand slots out to other processes (grant_server.hpp for the global
// variant, lock_server.hpp for the localized one) keep their own state per slot, under the same
// mutex, so that a slot and what is known of it never disagree.
//
// A slot that a failed process may still write into (a put it issued before it died may land
// late) is quarantined: moved to fresh memory and never given out again.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/config.hpp"
#include "common/decide.hpp"
#include "common/slot.hpp"
#include "transport/runtime.hpp"

namespace rmastore::internal {

// What reading one copy found.
// kNotFound: no copy here (no slot, or one never written); kDeleted: a tombstone, the key was
// deleted (not found, and no other holder need be asked).
enum class ReadResult { kOk, kNotFound, kDeleted, kLost, kTruncated, kRetry, kStale };

// A kReply to `msg` that describes the copy in `block`: where it is and what its header (read
// into `h`) says.
CtrlMsg copy_reply(const CtrlMsg &msg, const SlotAllocator::Block &block, SlotHeader &h);

// A request that is answered later: it waits for invalidation acks, or for a lock.
struct Deferred {
  CtrlMsg msg;
  int source;
};

class SlotStore {
public:
  using Block = SlotAllocator::Block;

  // New regions of memory are attached to rt's window.
  SlotStore(const Config &config, Runtime &rt);
  SlotStore(const SlotStore &) = delete;
  SlotStore &operator=(const SlotStore &) = delete;

  // Guards the slots, the allocator, the quarantine and the servers' state of each slot.
  std::mutex &mutex() const { return mu_; }

  // ---- for the servers, with mutex() held ----
  Block *find_locked(const SlotId &id);
  // The slot `msg` is about, made if a writer or locker asks for a new one. nullptr with the
  // reply in *refused: not found (a lookup, or a request that makes none), or no memory.
  Block *find_or_create_locked(const SlotId &id, const CtrlMsg &msg, CtrlMsg *refused);
  // A new slot `id` of at least `length` bytes (and of the configured initial size). Throws
  // std::bad_alloc or StoreError.
  Block *create_locked(const SlotId &id, std::size_t length);
  // Moves `block` (slot `id`) to fresh memory of at least `need` bytes, with its value. The old
  // block is returned, marked moved but not released: readers that cached its address may
  // still read it until the caller releases it.
  Block move_locked(const SlotId &id, Block &block, std::size_t need);
  // Moves `block` to fresh memory of at least `need` bytes with its value and lock word, and
  // releases the old block: readers that cached its address find it retired (or reused).
  void grow_locked(const SlotId &id, Block &block, std::size_t need);
  // A failed process may still have a put in flight into `block`: the block is retired (marked,
  // and kept out of the allocator for good); the slot continues in a fresh block of at least
  // `need` bytes, with the same contents and lock word.
  void quarantine_locked(const SlotId &id, Block &block, std::size_t need);
  // Keeps `block`, already moved from, out of the allocator for good: a failed process could
  // still write into it.
  void retire_locked(const Block &block) { quarantined_.push_back(block); }
  void release_locked(const Block &block);
  // Releases slot `id`'s memory and forgets the slot.
  void erase_locked(const SlotId &id);
  template <class F> void for_each_locked(F &&f) {
    for (auto &[id, block] : table_) f(id, block);
  }

  // ---- reading our own copies ----
  // Reads our own copy of `id`, without any lock: see the protocols of slot.hpp.
  ReadResult read_local(const SlotId &id, void *buf, std::size_t capacity, std::size_t *len) const;
  // The length of our complete copy of `id`, 0 if none.
  std::size_t local_length(const SlotId &id) const;
  // Every slot here but pending ones.
  std::vector<SlotId> slots() const;
  // The keys in [first, last] whose value copy here is complete or a lost marker, ascending, at
  // most `limit` of them (store_list).
  std::vector<std::uint64_t> keys_in(std::uint64_t first, std::uint64_t last, std::size_t limit) const;
  // For tests: our copy of a value, straight from memory.
  bool read_local_copy(std::uint64_t key, SlotHeader &header, std::vector<std::byte> &value) const;

  // ---- store_recover (no other thread of the store runs) ----
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
  // Counts value copies from the allocator's directory, without the mutex.
  void count(store_info_t &out) const;
  std::uint64_t enlargements_served() const { return enlargements_served_.load(); }
  // Bytes copied to quarantine slots since the store began (header and value of each).
  std::uint64_t quarantined_bytes() const { return quarantined_bytes_.load(); }
  // Empties the store; its memory goes with the window (finalize).
  void clear();
  // Leaves the memory to MPI_Finalize: the window it is attached to was not freed.
  void abandon();

private:
  using Table = std::unordered_map<SlotId, Block, SlotIdHash>;

  const Config &config_;
  mutable std::mutex mu_;
  std::unique_ptr<SlotAllocator> allocator_;
  Table table_;
  std::atomic<std::uint64_t> enlargements_served_{0};
  std::atomic<std::uint64_t> quarantined_bytes_{0};
  // Slots a failed process could still write into (its data may be in flight): never reused.
  std::vector<Block> quarantined_;
};

} // namespace rmastore::internal
