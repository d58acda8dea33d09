// Slots and memory: the layout of a copy in window memory, its checksum, and the allocator that
// carves slots out of memory regions attached to the dynamic window.
//
// A slot is a 64-byte header followed by the value, in one or two halves of `capacity` bytes:
//
//   offset  0  capacity   u64  written by the holder only
//   offset  8  owner      u64  written by the holder only: the lock word (see below)
//   offset 16  key        u64  -+
//   offset 24  version    u64   |  written by the writer: [16, 64) and the value
//   offset 32  length     u64   |
//   offset 40  epoch      u32   |
//   offset 44  writer     u32   |
//   offset 48  checksum   u64   |  see below
//   offset 56  flags      u64  -+  bits 0-7 flags, 8-15 namespace, 16-63 transaction
//   offset 64  value, first half (capacity bytes)
//   offset 64 + capacity  second half, only in slots of capacity > kInPlaceLimit
//
// Two dangers shape the protocols. A put may land in any byte order while a get races with it;
// even one 8-byte header field can be read half old, half new (seen in tests). And a writer may
// die in the middle of a put; the value it replaces must then survive on some copy.
//   in place (length <= kInPlaceLimit): header and value go out together in one put, which
//     Open MPI delivers as one message (up to 32 KiB) and the target applies in one copy, so a
//     dying writer leaves each copy old or new, never torn. The checksum covers header and
//     value; a reader accepts a copy only if it matches.
//   double-buffered (larger values): the writer puts the value into the half the header does
//     not point to, waits for completion on every copy, then puts a header pointing to it
//     (kFlagHalfB). A dying writer leaves the old value in place. Up to kSummedLimit the
//     checksum covers header and value (kFlagSummed): a reader reads the header, then the value
//     it names, and accepts them if they match, in two round trips. Above it, hashing would
//     cost more than a round trip saves, and the checksum covers the header only: a reader
//     reads the header, the value, the header again, and accepts two identical, valid headers.
// A slot that was never written holds a valid empty header (version 0, length 0), so "not found"
// is also a validated answer.
//
// The owner word is the slot's lock in the localized variant (docs/design.md): 0 when free,
// else the lock word of its holder, (stable id + 1) << 32 | acquisition << 1 | agent, set and cleared
// only by the holder's threads with atomic operations. kSlotRetired marks a slot its key gave
// up. The global variant leaves it 0 until the slot retires.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

namespace rmastore::internal {

struct SlotHeader {
  std::uint64_t capacity;
  std::uint64_t owner;
  std::uint64_t key;
  std::uint64_t version;
  std::uint64_t length;
  std::uint32_t epoch;
  std::uint32_t writer;
  std::uint64_t checksum;
  std::uint64_t flags;
};
static_assert(sizeof(SlotHeader) == 64, "slot header must stay one cache line");

inline constexpr std::size_t kHeaderBytes = sizeof(SlotHeader);
// The part of the header a writer puts along with the value.
inline constexpr std::size_t kWriterOffset = offsetof(SlotHeader, key);
inline constexpr std::size_t kWriterBytes = kHeaderBytes - kWriterOffset;
// Values up to this length are written in place, larger ones double-buffered.
inline constexpr std::size_t kInPlaceLimit = 16 * 1024;
inline bool in_place(std::uint64_t length) {
  return length <= kInPlaceLimit;
}
// Double-buffered values up to this length are summed (kFlagSummed). Hashing costs the writer
// about 32 ns per KiB (benchmarks/checksum_bench), which the put pays in full over shared memory:
// at 64 KiB a put took 25-40% longer there while a get gained 4%. Up to 32 KiB puts and gets over
// shared memory stayed within the runs' spread, and gets across hosts took 20-40% less
// (store_bench, benchmarks/results/store_bench-2026-11-29-summed-ab.jsonl).
inline constexpr std::size_t kSummedLimit = 32 * 1024;
inline bool summed_length(std::uint64_t length) {
  return !in_place(length) && length <= kSummedLimit;
}

// Namespaces: a key's value, and internal records kept in slots like values.
enum class Ns : std::uint8_t { kValue = 0, kPending = 1, kTxRecord = 2 };

// The flags word: flag bits, the slot's namespace, and the transaction of a pending value.
inline constexpr std::uint64_t kFlagHalfB = 1; // the value is in the second half
inline constexpr std::uint64_t kFlagLost = 2;  // every copy was lost (set by recovery)
// A tombstone: the key was deleted at this version. An in-place copy of length 0, checksummed
// like a value, so that it wins over older values and reads as "not found" (store_delete).
inline constexpr std::uint64_t kFlagDeleted = 4;
// A double-buffered copy whose checksum covers its value too (summed_length).
inline constexpr std::uint64_t kFlagSummed = 8;
inline constexpr std::uint64_t make_flags(std::uint64_t bits, Ns ns, std::uint64_t tx = 0) {
  return bits | (std::uint64_t(ns) << 8) | (tx << 16);
}
inline constexpr std::uint64_t flag_bits(std::uint64_t flags) {
  return flags & 0xff;
}
inline constexpr Ns flags_ns(std::uint64_t flags) {
  return Ns((flags >> 8) & 0xff);
}
inline constexpr std::uint64_t flags_tx(std::uint64_t flags) {
  return flags >> 16;
}

// Version 0 marks a slot that was allocated but never written.
inline constexpr std::uint64_t kNoVersion = 0;
// A retired slot was given up by its key (it moved or was freed). A reader that still had its
// address must look the key up again rather than take the old contents for the latest value.
// No lock word can take this value: its id part would be 0x52455448.
inline constexpr std::uint64_t kOwnerFree = 0;
inline constexpr std::uint64_t kSlotRetired = 0x5245544952454421ULL; // "RETIRED!"
inline constexpr std::size_t kOwnerOffset = offsetof(SlotHeader, owner);
// The owner word of the slot at `slot_base`. The holder's threads change it concurrently (the
// helper serves lock requests, agents lock local slots inline): always accessed atomically.
inline std::atomic_ref<std::uint64_t> owner_of(std::byte *slot_base) {
  return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t *>(slot_base + kOwnerOffset));
}

// Whole copies of the header at `slot_base`, out of and into memory, one 8-byte word at a time,
// each atomically (relaxed; callers that order by the owner word use owner_of with acquire and
// release). The holder's threads change the owner word concurrently (locks), and the helper
// rewrites whole headers (a slot freed, moved or reallocated) while the application thread reads
// its own copy without the store's mutex (SlotStore::read_local): a plain memcpy of the 64 bytes would be
// a data race between this process's threads. Words written by other processes' puts may still be
// torn across words: that is what the checksum detects. Slots are 64-byte aligned.
inline SlotHeader load_header(const std::byte *slot_base) {
  std::uint64_t w[kHeaderBytes / 8];
  auto *p = reinterpret_cast<std::uint64_t *>(const_cast<std::byte *>(slot_base));
  for (std::size_t i = 0; i < kHeaderBytes / 8; ++i)
    w[i] = std::atomic_ref<std::uint64_t>(p[i]).load(std::memory_order_relaxed);
  SlotHeader h;
  std::memcpy(&h, w, sizeof h);
  return h;
}
inline void store_header(std::byte *slot_base, const SlotHeader &h) {
  std::uint64_t w[kHeaderBytes / 8];
  std::memcpy(w, &h, sizeof h);
  auto *p = reinterpret_cast<std::uint64_t *>(slot_base);
  for (std::size_t i = 0; i < kHeaderBytes / 8; ++i)
    std::atomic_ref<std::uint64_t>(p[i]).store(w[i], std::memory_order_relaxed);
}

// Copies between private memory and a slot (header words or value) in this process's window
// memory, which other threads of this process may read or write at the same time (a get reading
// its own copy without the store's mutex while the helper moves the slot; a put writing the local
// copy while the helper copies it to a bigger slot): word by word with relaxed atomics, as a
// seqlock's data must be, so that these are not data races between this process's threads. What
// such a copy reads may still be a mix of old and new: the checksum and the header read again
// after the value (slot.cpp) reject it.
//
// Only the ThreadSanitizer build copies word by word: the words cannot be vectorised, and a local
// get of a 64 KiB value took 2.4 us instead of 0.8 (1 MiB: 39 instead of 23 us; a put/get probe
// at np 2 with 2 copies, 2026-11-24). Elsewhere a plain memcpy does the same job: the reader
// validates what it copied exactly as it must for the bytes other processes put into this memory
// by RMA, which no C++ memory model covers either.
#if defined(__SANITIZE_THREAD__)
#define RMASTORE_WORDWISE_WINDOW_COPIES 1
#endif
inline void copy_to_window(std::byte *dst, const void *src, std::size_t n) {
#if !defined(RMASTORE_WORDWISE_WINDOW_COPIES)
  std::memcpy(dst, src, n);
#else
  const auto *s = static_cast<const std::byte *>(src);
  std::size_t i = 0;
  if (reinterpret_cast<std::uintptr_t>(dst) % 8 == 0) {
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, s + i, 8);
      std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t *>(dst + i)).store(w, std::memory_order_relaxed);
    }
  }
  for (; i < n; ++i) std::atomic_ref<std::byte>(dst[i]).store(s[i], std::memory_order_relaxed);
#endif
}
inline void copy_from_window(void *dst, const std::byte *src, std::size_t n) {
#if !defined(RMASTORE_WORDWISE_WINDOW_COPIES)
  std::memcpy(dst, src, n);
#else
  auto *d = static_cast<std::byte *>(dst);
  auto *s = const_cast<std::byte *>(src);
  std::size_t i = 0;
  if (reinterpret_cast<std::uintptr_t>(s) % 8 == 0) {
    for (; i + 8 <= n; i += 8) {
      const std::uint64_t w =
          std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t *>(s + i)).load(std::memory_order_relaxed);
      std::memcpy(d + i, &w, 8);
    }
  }
  for (; i < n; ++i) d[i] = std::atomic_ref<std::byte>(s[i]).load(std::memory_order_relaxed);
#endif
}

inline void copy_within_window(std::byte *dst, const std::byte *src, std::size_t n) {
#if !defined(RMASTORE_WORDWISE_WINDOW_COPIES)
  std::memmove(dst, src, n);
#else
  std::byte buf[512];
  for (std::size_t i = 0; i < n; i += sizeof buf) {
    const std::size_t k = std::min(sizeof buf, n - i);
    copy_from_window(buf, src + i, k);
    copy_to_window(dst + i, buf, k);
  }
#endif
}

// Lock words: who holds a slot's lock. `agent` tells a process's application thread (0) from its
// repair thread (1); `acquisition` numbers the agent's lock acquisitions, so that an unlock still
// on its way from an earlier one cannot release the same agent's next hold of the lock (an
// agent's unlock to its own helper may be overtaken by its next lock request, which it serves
// inline), and a hold survives store_recover's change of epoch.
inline constexpr std::uint64_t lock_word(int id, std::uint32_t acquisition, int agent) {
  return (std::uint64_t(id) + 1) << 32 | std::uint64_t(acquisition & 0x7fffffffu) << 1 | std::uint64_t(agent & 1);
}
inline constexpr int lock_word_id(std::uint64_t w) {
  return static_cast<int>((w >> 32) - 1);
}
// Whether the agent that took the lock may keep it after its operation: only the application
// thread's puts do (variants/localized/locks.hpp); the repair thread's are agent 1.
inline constexpr bool lock_word_cacheable(std::uint64_t w) {
  return (w & 1) == 0;
}

// Checksum (XXH3, 64 bits) of the writer's part of the header, and of a checksummed copy (header
// and value). The checksum field itself is not covered.
std::uint64_t header_checksum(const SlotHeader &h);
std::uint64_t slot_checksum(const SlotHeader &h, const void *value);
// The checksum a copy with header `h` carries: slot_checksum for in-place and summed copies,
// header_checksum for the others (`value` unused).
std::uint64_t copy_checksum(const SlotHeader &h, const void *value);
// slot_checksum from the value's XXH3 (value_sum), for a writer that sums one value under two
// headers.
std::uint64_t value_sum(const void *value, std::size_t len);
std::uint64_t slot_checksum_of_sum(const SlotHeader &h, std::uint64_t sum);
// XXH3 of any bytes (the durable tier's files).
std::uint64_t bytes_checksum(const void *data, std::size_t len);

// In-place copies: true if `h` and `value` (h.length bytes) form a complete, untorn copy (a
// tombstone included).
bool slot_valid(const SlotHeader &h, const void *value);
// Whether a valid copy is a tombstone.
inline bool slot_deleted(const SlotHeader &h) {
  return flag_bits(h.flags) == kFlagDeleted;
}
// Double-buffered copies: true if the headers read before and after the value show that no put
// touched the value meanwhile.
bool buffered_valid(const SlotHeader &before, const SlotHeader &after);
// Summed double-buffered copies: true if `h` and the value it names (h.length bytes at
// value_offset) form a complete, untorn copy. A value read after its header needs nothing more.
bool summed_valid(const SlotHeader &h, const void *value);
inline bool slot_summed(const SlotHeader &h) {
  return (flag_bits(h.flags) & kFlagSummed) != 0;
}
// Where the value of a copy with header `h` starts, from the slot's header, in a slot of
// `capacity` bytes per half.
std::size_t value_offset(const SlotHeader &h, std::uint64_t capacity);
// True if `h` is the untorn header of a slot that was never written. The key is part of it: a
// slot freed and handed to another key must not read as "not found" for the old one.
bool slot_empty(const SlotHeader &h);
// True if `h` is the untorn header recovery leaves where every copy of a key was lost.
bool slot_lost(const SlotHeader &h);
// The header of a slot for (`key`, `ns`) that was never written, or whose value was lost.
SlotHeader empty_header(std::uint64_t capacity, std::uint64_t key, Ns ns);
SlotHeader lost_header(std::uint64_t capacity, std::uint64_t key, Ns ns);

// Capacity classes are powers of two, at least `min_capacity` (itself a power of two >= 8).
std::size_t capacity_class(std::size_t need, std::size_t min_capacity);
// Bytes a slot of `capacity` takes in memory: header plus one half, or two halves for
// capacities above kInPlaceLimit (values that large are double-buffered), 64-byte aligned.
std::size_t slot_bytes(std::size_t capacity);

// Hands out slots from memory regions ("arenas") attached to the window. Regions are mapped
// lazily, so a large region costs address space, not memory, until it is written. Each region is
// attached once, and is at least twice as large as the one before (up to kMaxRegionStep), also
// when a slot does not fit the next size and the region is made for it: so the number of
// regions grows logarithmically with the memory held, even with slots of a GiB or more, and
// stays well below the MPI library's limit on regions per window (Open MPI: osc_rdma_max_attach,
// default 64), which RmaWindow::attach enforces.
class SlotAllocator {
public:
  struct Region {
    std::byte *base;
    std::size_t bytes;
  };
  struct Block {
    std::byte *base = nullptr; // the slot header
    std::size_t capacity = 0;  // value bytes after the header
    std::size_t index = 0;     // in the directory of slots (for_each_slot)
  };
  using AttachFn = std::function<void(void *, std::size_t)>;

  SlotAllocator(std::size_t min_capacity, std::size_t first_region_bytes, AttachFn attach);
  ~SlotAllocator();
  SlotAllocator(const SlotAllocator &) = delete;
  SlotAllocator &operator=(const SlotAllocator &) = delete;

  // A slot for `key` whose capacity is the class of `need`, with an empty header. Throws
  // std::bad_alloc when memory or regions run out.
  Block allocate(std::size_t need, std::uint64_t key, Ns ns);
  // Marks the slot retired and makes it available again.
  void release(Block b);

  // The allocating thread only (or with the allocation serialised, as the slot table's lock does).
  const std::vector<Region> &regions() const { return regions_; }
  // Copies the current value of `from` (header and value) into the first half of `to`, which
  // must be large enough. Used when a slot moves. Returns the bytes written (header part and value).
  static std::size_t copy_value(const Block &from, const Block &to);
  // Any thread, without the lock that serialises allocation.
  std::size_t attached_bytes() const { return attached_bytes_.load(std::memory_order_relaxed); }
  int region_count() const { return region_count_.load(std::memory_order_relaxed); }
  std::size_t min_capacity() const { return min_capacity_; }

  // Calls f(slot header) for every slot handed out and neither released nor marked moved. Any
  // thread, without the lock that serialises allocation: the directory of slots only grows, and
  // slot memory stays mapped until the allocator is destroyed. Slots handed out, released or
  // marked meanwhile may or may not be seen; f must expect any header contents (a slot may be
  // reused for another key while f reads it).
  template <class F> void for_each_slot(F &&f) const {
    const std::size_t n = slots_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uintptr_t e = entry(i).load(std::memory_order_acquire);
      if ((e & kSkip) == 0) f(reinterpret_cast<const std::byte *>(e));
    }
  }
  // Leaves a slot that moved out of for_each_slot until it is handed out again: its value now
  // lives in another slot, but readers may still use the old one until it is released.
  void mark_moved(const Block &b);

  // Largest region added in one step once regions are large (unless one slot needs more). It
  // bounds the address space reserved ahead of use, which networks that register attached
  // memory pin; 64 regions of this size are far more than a process can fill.
  static constexpr std::size_t kMaxRegionStep = std::size_t{16} << 30;

private:
  std::byte *carve(std::size_t bytes);
  // The directory: entry i is the header address of the i-th slot carved, with kSkip set while
  // the slot is free or moved. Chunk c holds kFirstChunk << c entries and is never freed or
  // moved, so readers need no lock; slots_ (release/acquire) publishes new entries and chunks.
  static constexpr std::uintptr_t kSkip = 1; // headers are 64-byte aligned
  static constexpr std::size_t kFirstChunk = 1024;
  static constexpr int kChunks = 44; // 1024 * (2^44 - 1) slots: more than any memory holds
  std::atomic<std::uintptr_t> &entry(std::size_t i) const;
  void reserve_entry();                   // makes sure add_entry has room; may throw
  std::size_t add_entry(std::byte *base); // cannot fail after reserve_entry

  std::size_t min_capacity_;
  std::size_t next_region_bytes_;
  AttachFn attach_;
  std::vector<Region> regions_;
  std::atomic<std::size_t> attached_bytes_{0};
  std::atomic<int> region_count_{0};
  std::byte *bump_ = nullptr;
  std::byte *bump_end_ = nullptr;
  std::vector<std::vector<Block>> free_; // free slots per capacity class (log2)
  std::unique_ptr<std::atomic<std::uintptr_t>[]> chunks_[kChunks];
  std::atomic<std::size_t> slots_{0};
};

} // namespace rmastore::internal
