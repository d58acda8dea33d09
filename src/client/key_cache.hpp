// The client side's memory of where each key's copies are: per holder, the slot's address and
// the grant that lets this process write or read it without asking (global variant), and the
// order in which to read the copies. Any thread may use it; one mutex guards it.
//
// An entry is made from the membership view of its time, and made again when placement
// changed (localized variant): its addresses may belong to holders that are no longer the key's.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/config.hpp"
#include "transport/membership.hpp"
#include "transport/runtime.hpp"

namespace rmastore::internal {

struct HolderCache : Copy {
  std::uint64_t grant = 0;
  std::uint64_t floor = 0; // grants up to here were invalidated
  bool can_write = false;
  bool can_read = false;
};

class KeyCache {
public:
  // The most keys it remembers: beyond, it forgets some (any: a forgotten grant or address is
  // asked for again, and the holder hands it to the same writer without invalidating anyone),
  // so that a process that writes or reads many keys held elsewhere stops growing here.
  static constexpr std::size_t kMaxEntries = std::size_t{1} << 16;

  // `id` is this process's stable id; rt gives its current rank.
  KeyCache(const Runtime &rt, const Membership &membership, int id) : rt_(rt), membership_(membership), id_(id) {}

  // The copies of `id` in placement order, and the newest version this process wrote or was
  // granted.
  std::vector<HolderCache> holders(const SlotId &id, std::uint64_t *version);
  // The holders, cheapest to read first: this process, then its node, then placement order.
  std::vector<int> read_order(const SlotId &id);
  HolderCache at(const SlotId &id, int holder);
  // A holder's kInvalidate: grants up to `grant` no longer hold.
  void invalidate(const SlotId &id, int holder, std::uint64_t grant);
  // A holder's reply to kAcquireWrite (`write`) or kLookup.
  void install(const SlotId &id, int holder, const CtrlMsg &reply, bool write);
  // A read of the copy at `address` found it moved (`stale`), or read `length` bytes.
  void after_read(const SlotId &id, int holder, std::uint64_t address, bool stale, std::size_t length);
  // A write with `version` begins: a later one must not reuse it, even if this one fails.
  void raise_version(const SlotId &id, std::uint64_t version);
  // A write of `length` bytes completed: `written` says which half each copy's value is in now.
  void after_write(const SlotId &id, std::size_t length, const std::vector<Copy> &written);
  // Global variant: this process wrote `id` with the grants it holds, and the key's records exist
  // at its witnesses (witnesses.hpp). Cleared when a grant is invalidated.
  bool witnessed(const SlotId &id);
  void set_witnessed(const SlotId &id);
  // Forgets everything about `key` (it was deleted): its slots here may be freed and made again.
  void forget(std::uint64_t key);
  void clear();

private:
  struct KeyState {
    std::vector<HolderCache> holders; // in placement order
    std::vector<int> read_order;
    std::uint64_t version = 0;
    int view = 0; // failures placement accounted for when `holders` was made
    bool witnessed = false;
  };
  KeyState &state_locked(const SlotId &id);

  const Runtime &rt_;
  const Membership &membership_;
  const int id_;
  std::mutex mu_;
  std::unordered_map<SlotId, KeyState, SlotIdHash> cache_;
};

} // namespace rmastore::internal
